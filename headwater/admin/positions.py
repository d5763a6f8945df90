"""Where `headwater consume --from` starts: `beginning`, `end`, an OFFSET (a negative one
counts back from the end, as kcat's `-o -N`), or `@TIMESTAMP_MS` (the first record at
or after it, ListOffsets by timestamp; the end when there is none)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from . import rdkafka


@dataclass(frozen=True, slots=True)
class Start:
    offset: int | None = None      # a logical or absolute offset
    timestamp: int | None = None   # ms since the epoch

    @property
    def name(self) -> str:
        return "beginning" if self.offset == OFFSET_BEGINNING else \
            "end" if self.offset == OFFSET_END else "other"


def parse(text: str) -> Start:
    """argparse type of --from."""
    if text == "beginning":
        return Start(OFFSET_BEGINNING)
    if text == "end":
        return Start(OFFSET_END)
    try:
        if text.startswith("@"):
            return Start(timestamp=int(text[1:]))
        offset = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected beginning, end, OFFSET or @TIMESTAMP_MS, got {text!r}") from None
    # librdkafka's OFFSET_TAIL(n) is -2000 - n
    return Start(offset if offset >= 0 else -2000 + offset)


def resolve(consumer: Consumer, topic: str, partitions: list[int], start: Start,
            args: argparse.Namespace) -> list[TopicPartition]:
    """The partitions, each at the offset `start` names."""
    if start.timestamp is None:
        offset = OFFSET_BEGINNING if start.offset is None else start.offset
        return [TopicPartition(topic, p, offset) for p in partitions]
    try:
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, start.timestamp) for p in partitions],
            timeout=rdkafka.CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args, f"topic {topic}") from None
    return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found]
