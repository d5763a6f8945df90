"""What the topic, produce and consume commands share: a librdkafka configuration built
from `--bootstrap-server`, `--command-config` and `--command-property` (Kafka's Java
names mapped by `to_librdkafka`), and librdkafka's errors turned into one line naming
the problem and a hint.

They use confluent-kafka (librdkafka) rather than the raw client because they must work
against any Kafka-compatible broker exactly as an ordinary client does: idempotent
producing, group membership, share consumers. The bootstrap timeout is short (a few
seconds, not librdkafka's minutes of retries) so an unreachable broker is reported at
once, and librdkafka's own log lines are silenced: the command reports the error.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from ..wire.client_properties import read_properties, to_librdkafka
from .groups import AdminError as AdminError  # re-exported: callers catch it as rdkafka.AdminError

CONNECT_TIMEOUT_S = 5.0
T = TypeVar("T")

_QUIET = logging.getLogger("headwater.cli.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

_AUTHORIZATION = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                  "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
_UNREACHABLE = {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE",
                "_MSG_TIMED_OUT"}


def config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for this command: security from the command's properties, and
    a short socket/metadata timeout."""
    props = read_properties(args.command_config) if getattr(args, "command_config", None) \
        else {}
    props.update(dict(getattr(args, "command_property", [])))
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server,
                            "socket.connection.setup.timeout.ms": int(CONNECT_TIMEOUT_S * 1000),
                            # a describe or a produce must not create a topic it names
                            "allow.auto.create.topics": False,
                            "logger": _QUIET, "error_cb": _ignore}
    conf.update(to_librdkafka(props))
    conf.update(extra)
    return conf


def make(factory: Callable[[dict[str, Any]], T], conf: dict[str, Any]) -> T:
    """A librdkafka client; a setting it refuses is one line, not a traceback."""
    try:
        return factory(conf)
    except (ValueError, KafkaException) as exc:
        raise AdminError(f"{exc}; hint: check --command-config / --command-property") \
            from None


def _ignore(_error: KafkaError) -> None:
    """librdkafka reports connection failures here too; the command's own call fails
    with the error, which `explain` words."""


def explain(error: KafkaError | KafkaException | Exception, args: argparse.Namespace,
            subject: str = "") -> AdminError:
    """One line naming the problem and a hint."""
    if isinstance(error, KafkaException) and error.args and \
            isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if not isinstance(error, KafkaError):
        return AdminError(f"{subject}: {error}" if subject else str(error))
    name, text = error.name(), error.str()
    what = f"{subject}: " if subject else ""
    if name in _UNREACHABLE:
        return AdminError(f"cannot reach a broker at {args.bootstrap_server} ({name}: {text});"
                          " hint: is it running? check --bootstrap-server")
    if name in _AUTHORIZATION:
        return AdminError(f"{what}authorization failed ({name}); hint: an ACL refuses this "
                          "principal (check --command-config and the broker's ACLs)")
    if name == "SECURITY_DISABLED":
        return AdminError(f"{what}the broker has no authorizer (SECURITY_DISABLED); hint: "
                          "ACLs need authorizer.class.name set on the broker "
                          "(org.apache.kafka.metadata.authorizer.StandardAuthorizer)")
    if name == "UNKNOWN_TOPIC_OR_PART":
        return AdminError(f"{what}topic does not exist (UNKNOWN_TOPIC_OR_PART); hint: "
                          "`headwater topic list`, `headwater topic create NAME`")
    if name == "TOPIC_EXCEPTION":
        return AdminError(f"{what}invalid topic name (INVALID_TOPIC_EXCEPTION: {text}); hint:"
                          " use letters, digits, '.', '_' and '-', at most 249 characters")
    if name == "TOPIC_ALREADY_EXISTS":
        return AdminError(f"{what}topic already exists; hint: `headwater topic describe`")
    if name in {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_SSL"}:
        return AdminError(f"authentication failed ({name}: {text}); hint: check the "
                          "security settings of --command-config / --command-property")
    return AdminError(f"{what}{name}: {text}")


def check_topic(metadata: Any, topic: str, args: argparse.Namespace) -> int:
    """The topic's partition count, or the error its metadata names."""
    found = metadata.topics.get(topic)
    if found is None:
        raise explain(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), args, f"topic {topic}")
    if found.error is not None:
        raise explain(found.error, args, f"topic {topic}")
    return len(found.partitions)
