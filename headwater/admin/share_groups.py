"""`headwater share-groups ...`: list, describe, reset offsets of, delete offsets of and
delete share groups (KIP-932), like Kafka's kafka-share-groups tool.

A share group has no committed offsets: each share-partition has a start offset (SPSO)
kept by the share coordinator, and a lag (KIP-1226: records not yet delivered and
finished). describe --offsets shows both (DescribeShareGroupOffsets v1); reset-offsets
is a dry run unless --execute and needs an empty group (AlterShareGroupOffsets).
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from ..share.config import parse_duration_ms
from ..wire.client import RawClient
from .groups import (
    AdminError,
    Offsets,
    _client,
    _to_millis,
    add_group_command,
    add_group_tool,
    add_reset_offsets_parser,
    delete_group,
    reset_offsets,
)
from .tables import emit


def _duration_ms(text: str) -> int:
    """ISO-8601 duration (Kafka's --by-duration), e.g. PT1H30M or P1DT2H."""
    try:
        return parse_duration_ms(text)
    except ValueError:
        raise AdminError(f"invalid duration {text!r} (ISO-8601, e.g. PT1H)") from None


def _describe_group(client: Any, group: str) -> Any:
    g = client.request(77, 1, {"group_ids": [group],
                               "include_authorized_operations": False}).groups[0]
    if int(g.error_code):
        raise AdminError(f"share group {group}: {g.error_code.name}"
                         + (f" ({g.error_message})" if g.error_message else ""))
    return g


def _offsets(client: Any, group: str) -> list[tuple[str, int, int, int]]:
    resp = client.request(90, 1, {"groups": [{"group_id": group, "topics": None}]})
    g = resp.groups[0]
    if int(g.error_code):
        raise AdminError(f"share group {group}: {g.error_code.name}")
    return sorted((t.topic_name, p.partition_index, p.start_offset, p.lag)
                  for t in g.topics for p in t.partitions)


def cmd_list(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        resp = client.request(16, 5, {"states_filter": (), "types_filter": ("share",)})
    finally:
        client.close()
    rows = sorted((g.group_id, g.group_state) for g in resp.groups)
    return emit(["GROUP", "STATE"], rows, args.json)


def cmd_describe(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        g = _describe_group(client, args.group)
        if args.state:
            rows = [(g.group_id, g.group_state, len(g.members), g.group_epoch,
                     g.assignment_epoch)]
            return emit(["GROUP", "STATE", "#MEMBERS", "GROUP-EPOCH", "ASSIGNMENT-EPOCH"],
                        rows, args.json)
        if args.members:
            member_rows = []
            for m in g.members:
                assigned = ",".join(f"{tp.topic_name}:{','.join(map(str, tp.partitions))}"
                                    for tp in m.assignment.topic_partitions)
                member_rows.append((g.group_id, m.member_id, m.client_host, m.client_id,
                                    m.member_epoch, assigned))
            return emit(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH",
                         "ASSIGNMENT"], member_rows, args.json)
        offsets = _offsets(client, args.group)
    finally:
        client.close()
    rows = [(args.group, t, p, None if start < 0 else start, None if lag < 0 else lag)
            for t, p, start, lag in offsets]
    out = emit(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], rows, args.json)
    return out if args.json else f"Share group {args.group} is {g.group_state}\n\n{out}"


def cmd_reset_offsets(args: argparse.Namespace) -> str:
    def timestamp() -> int | None:
        if args.to_datetime is not None:
            return _to_millis(args.to_datetime)
        if args.by_duration is not None:
            now = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
            return now - _duration_ms(args.by_duration)
        return None

    def alter(client: RawClient, new: Offsets) -> None:
        resp = client.request(91, 0, {"group_id": args.group, "topics": [
            {"topic_name": args.topic, "partitions": [
                {"partition_index": p, "start_offset": o}
                for (_, p), o in sorted(new.items())]}]})
        if int(resp.error_code):
            raise AdminError(f"reset failed: {resp.error_code.name}"
                             + (f" ({resp.error_message})" if resp.error_message else ""))
        errors = [p.error_code.name for t in resp.responses for p in t.partitions
                  if int(p.error_code)]
        if errors:
            raise AdminError(f"reset failed ({', '.join(sorted(set(errors)))})")

    return reset_offsets(args, timestamp, alter, "reset the start offsets",
                         negative_offset_ok=False)


def cmd_delete_offsets(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        resp = client.request(92, 0, {"group_id": args.group,
                                      "topics": [{"topic_name": t} for t in args.topic]})
    finally:
        client.close()
    if int(resp.error_code):
        raise AdminError(f"deleting offsets failed: {resp.error_code.name}"
                         + (f" ({resp.error_message})" if resp.error_message else ""))
    rows = [(t.topic_name, "Successful" if not int(t.error_code) else t.error_code.name)
            for t in resp.responses]
    return emit(["TOPIC", "STATUS"], rows, args.json)


def cmd_delete(args: argparse.Namespace) -> str:
    return delete_group(args, "share group")


def add_parser(sub: Any) -> None:
    commands, describe = add_group_tool(
        sub, "share-groups", "list, describe, reset and delete share groups",
        "share_groups_command", cmd_list, cmd_describe)
    what = describe.add_mutually_exclusive_group()
    what.add_argument("--offsets", action="store_true", help="start offset and lag (default)")
    what.add_argument("--members", action="store_true")
    what.add_argument("--state", action="store_true")
    add_reset_offsets_parser(commands, cmd_reset_offsets, by_duration=True)
    add_group_command(commands, "delete-offsets", cmd_delete_offsets).add_argument(
        "--topic", action="append", required=True)
    add_group_command(commands, "delete", cmd_delete)
