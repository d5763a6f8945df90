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
from .connect import add_arguments
from .groups import AdminError, _client, _list_offsets, _partitions, _to_millis, delete_group
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
    client = _client(args)
    try:
        parts = _partitions(client, [args.topic])
        if args.to_earliest:
            new = _list_offsets(client, parts, -2)
        elif args.to_latest:
            new = _list_offsets(client, parts, -1)
        elif args.to_datetime is not None or args.by_duration is not None:
            ts = _to_millis(args.to_datetime) if args.to_datetime is not None else int(
                datetime.datetime.now(datetime.UTC).timestamp() * 1000
            ) - _duration_ms(args.by_duration)
            new = _list_offsets(client, parts, ts)
            latest = _list_offsets(client, parts, -1)
            new = {k: (v if v >= 0 else latest[k]) for k, v in new.items()}
        else:
            if args.to_offset < 0:
                raise AdminError(f"invalid offset {args.to_offset}")
            new = {(args.topic, p): args.to_offset for p in parts[args.topic]}
        if args.execute:
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
    finally:
        client.close()
    rows = [(args.group, t, p, o) for (t, p), o in sorted(new.items())]
    out = emit(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, args.json)
    if not args.execute and not args.json:
        out += "\n\n(dry run: nothing changed; add --execute to reset the start offsets)"
    return out


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
    p = sub.add_parser("share-groups", help="list, describe, reset and delete share groups")
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    s = p.add_subparsers(dest="share_groups_command", required=True)
    s.add_parser("list").set_defaults(func=cmd_list)
    d = s.add_parser("describe")
    d.add_argument("group")
    what = d.add_mutually_exclusive_group()
    what.add_argument("--offsets", action="store_true", help="start offset and lag (default)")
    what.add_argument("--members", action="store_true")
    what.add_argument("--state", action="store_true")
    d.set_defaults(func=cmd_describe)
    r = s.add_parser("reset-offsets")
    r.add_argument("group")
    r.add_argument("--topic", required=True)
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--to-datetime", help="ISO-8601, e.g. 2026-01-01T00:00:00")
    how.add_argument("--by-duration", help="ISO-8601 duration back from now, e.g. PT1H")
    r.add_argument("--execute", action="store_true")
    r.set_defaults(func=cmd_reset_offsets)
    x = s.add_parser("delete-offsets")
    x.add_argument("group")
    x.add_argument("--topic", action="append", required=True)
    x.set_defaults(func=cmd_delete_offsets)
    y = s.add_parser("delete")
    y.add_argument("group")
    y.set_defaults(func=cmd_delete)
