"""What the raw-client admin commands (configs, client quotas, cluster info) share: a
connection whose failure is one line with a hint, and a broker's error code worded as
librdkafka's are (`rdkafka.explain`), with a hint of the command's own when that has
none."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import KafkaError

from ..wire.client import RawClient
from . import rdkafka
from .connect import connect
from .groups import AdminError


def open_client(args: argparse.Namespace) -> RawClient:
    try:
        return connect(args)
    except OSError as exc:
        raise AdminError(f"cannot reach a broker at {args.bootstrap_server} ({exc}); "
                         "hint: is it running? check --bootstrap-server") from None


def check(code: int, message: str | None, args: argparse.Namespace, subject: str,
          hint: str) -> None:
    """Raise the one-line error a non-zero `code` names."""
    if not code:
        return
    text, _, given = str(rdkafka.explain(KafkaError(code), args, subject)).partition("; hint: ")
    if message and message not in text:
        text = f"{text} ({message})"
    raise AdminError(f"{text}; hint: {given or hint}")


def request(client: RawClient, api: tuple[int, int, str], body: dict[str, Any],
            args: argparse.Namespace) -> Any:
    """Send `body` as API (key, version, name); a broker that drops the connection (an
    API or version it does not serve) is one line with a hint."""
    key, version, name = api
    try:
        return client.request(key, version, body)
    except OSError as exc:
        raise AdminError(f"{name} v{version} to {args.bootstrap_server} failed ({exc}); "
                         f"hint: does the broker support {name}? (Kafka 2.8+)") from None
