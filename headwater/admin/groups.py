"""`headwater groups ...`: list, describe, delete and reset offsets of consumer groups.

Like Kafka's kafka-consumer-groups tool: describe shows each partition's committed
offset, log end offset and lag; reset-offsets is a dry run unless --execute.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.serial import entity_reader

from ..wire.client import RawClient
from .connect import add_arguments
from .routing import Routed
from .tables import emit

NO_AUTH_OPS = False


class AdminError(RuntimeError):
    pass


def _client(args: argparse.Namespace) -> Any:
    """A `RawClient` whose requests go where Kafka's AdminClient sends them: a group's to
    its coordinator, ListGroups to every broker, ListOffsets to the leaders (routing.py)."""
    return Routed(args)


def _partitions(client: RawClient, topics: list[str] | None) -> dict[str, list[int]]:
    resp = client.request(3, 12, {"topics": None if topics is None else [
        {"name": t, "topic_id": None} for t in topics], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    out = {}
    for t in resp.topics:
        if int(t.error_code):
            raise AdminError(f"topic {t.name}: error {t.error_code.name}")
        out[t.name] = sorted(p.partition_index for p in t.partitions)
    return out


def _list_offsets(client: RawClient, parts: dict[str, list[int]], timestamp: int
                  ) -> dict[tuple[str, int], int]:
    if not parts:
        return {}
    resp = client.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp}
                                   for p in ps]} for t, ps in parts.items()]})
    return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions}


def _committed(client: RawClient, group: str) -> dict[tuple[str, int], int]:
    resp = client.request(9, 8, {"groups": [{"group_id": group, "topics": None}],
                                 "require_stable": False})
    g = resp.groups[0]
    if int(g.error_code):
        raise AdminError(f"group {group}: error {g.error_code.name}")
    return {(t.name, p.partition_index): p.committed_offset
            for t in g.topics for p in t.partitions if p.committed_offset >= 0}


Owner = tuple[str, str, str]  # member id, host, client id


@dataclass(frozen=True)
class GroupAssignment:
    """Who holds what in a group: its state, each partition's owner and, for a streams
    group, every member (id, host, client id) with its tasks by role
    ({member id: (owner, {"active": {"0": [0, 1]}, ...})})."""
    state: str
    owners: dict[tuple[str, int], Owner]
    tasks: dict[str, tuple[Owner, dict[str, dict[str, list[int]]]]] = field(
        default_factory=dict)


def _assignment_owners(client: RawClient, group: str) -> tuple[str, dict[tuple[str, int], Owner]]:
    """(state, {(topic, partition): (member id, host, client id)})."""
    found = _assignment(client, group)
    return found.state, found.owners


def _assignment(client: RawClient, group: str) -> GroupAssignment:
    """The group's assignment, from the describe API of its type (KIP-848 consumer,
    streams, or classic)."""
    owners: dict[tuple[str, int], Owner] = {}
    versions = client.request(18, 3, {"client_software_name": "headwater-cli",
                                      "client_software_version": "1"})
    if any(k.api_key == 69 for k in versions.api_keys):
        g = client.request(69, 1, {"group_ids": [group],
                                   "include_authorized_operations": False}).groups[0]
    else:
        g = None
    if g is not None and int(g.error_code) == 0:
        for m in g.members:
            for tp in m.assignment.topic_partitions:
                for p in tp.partitions:
                    owners[(tp.topic_name, p)] = (m.member_id, m.client_host, m.client_id)
        return GroupAssignment(g.group_state, owners)
    if any(k.api_key == 89 for k in versions.api_keys):
        s = client.request(89, 0, {"group_ids": [group],
                                   "include_authorized_operations": False}).groups[0]
        if int(s.error_code) == 0:
            return GroupAssignment(s.group_state, _task_owners(s), _member_tasks(s))
    resp = client.request(15, 5, {"groups": [group], "include_authorized_operations": False})
    d = resp.groups[0]
    if d.protocol_type == "consumer":
        reader = entity_reader(_assignment_type())
        for m in d.members:
            if not m.member_assignment:
                continue
            try:
                assignment = reader(m.member_assignment, 2)[0]
            except Exception:
                continue
            for tp in assignment.assigned_partitions:
                for p in tp.partitions:
                    owners[(tp.topic, p)] = (m.member_id, m.client_host, m.client_id)
    return GroupAssignment(d.group_state, owners)


def _member_tasks(described: Any
                  ) -> dict[str, tuple[Owner, dict[str, dict[str, list[int]]]]]:
    """A streams group's members with their tasks by role, subtopology and partition."""
    out: dict[str, tuple[Owner, dict[str, dict[str, list[int]]]]] = {}
    for m in described.members:
        roles = {}
        for role in ("active", "standby", "warmup"):
            tasks = {t.subtopology_id: sorted(int(p) for p in t.partitions)
                     for t in getattr(m.assignment, f"{role}_tasks") if t.partitions}
            if tasks:
                roles[role] = dict(sorted(tasks.items()))
        out[m.member_id] = ((m.member_id, m.client_host, m.client_id), roles)
    return out


def _task_owners(described: Any) -> dict[tuple[str, int], Owner]:
    """A streams group's (StreamsGroupDescribe) input partitions by the member whose
    active task reads them: task n of a subtopology reads partition n of its sources."""
    sources: dict[str, list[str]] = {}
    for sub in (described.topology.subtopologies or ()) if described.topology else ():
        sources[sub.subtopology_id] = (list(sub.source_topics)
                                       + [t.name for t in sub.repartition_source_topics])
    owners: dict[tuple[str, int], Owner] = {}
    for m in described.members:
        for task in m.assignment.active_tasks:
            for topic in sources.get(task.subtopology_id, ()):
                for p in task.partitions:
                    owners[(topic, int(p))] = (m.member_id, m.client_host, m.client_id)
    return owners


def _assignment_type() -> Any:
    from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment

    return ConsumerProtocolAssignment


def cmd_list(args: argparse.Namespace) -> str:
    with_client = _client(args)
    try:
        resp = with_client.request(16, 5, {"states_filter": (), "types_filter": ()})
    finally:
        with_client.close()
    rows = sorted((g.group_id, g.group_type, g.group_state, g.protocol_type)
                  for g in resp.groups)
    return emit(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"], rows, args.json)


def cmd_describe(args: argparse.Namespace) -> str:
    client = _client(args)
    try:
        committed = _committed(client, args.group)
        state, owners = _assignment_owners(client, args.group)
        topics = sorted({t for t, _ in committed} | {t for t, _ in owners})
        parts = _partitions(client, topics) if topics else {}
        ends = _list_offsets(client, parts, -1)
    finally:
        client.close()
    rows = []
    for (topic, partition) in sorted(set(committed) | set(owners)):
        current = committed.get((topic, partition))
        end = ends.get((topic, partition))
        lag = end - current if current is not None and end is not None else None
        member, host, client_id = owners.get((topic, partition), (None, None, None))
        rows.append((args.group, topic, partition, current, end, lag, member, host, client_id))
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]
    out = emit(header, rows, args.json)
    return out if args.json else f"Group {args.group} is {state}\n\n{out}"


def cmd_delete(args: argparse.Namespace) -> str:
    return delete_group(args, "group")


def delete_group(args: argparse.Namespace, kind: str) -> str:
    """DeleteGroups for group `args.group` (any type); `kind` names it in the answer."""
    group = args.group
    client = _client(args)
    try:
        resp = client.request(42, 2, {"groups_names": [group]})
    finally:
        client.close()
    code = resp.results[0].error_code
    if int(code):
        raise AdminError(f"deleting {kind} {group} failed: {code.name}")
    return f"Deleted {kind} {group}"


def _to_millis(text: str) -> int:
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise AdminError(f"invalid datetime {text!r} (ISO-8601, e.g. 2026-01-01T00:00:00)"
                         ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


Offsets = dict[tuple[str, int], int]


def reset_offsets(args: argparse.Namespace, timestamp: Callable[[], int | None],
                  write: Callable[[RawClient, Offsets], None], execute_note: str,
                  negative_offset_ok: bool = True) -> str:
    """reset-offsets of a consumer or share group: the new offset of each partition of
    `args.topic` (earliest, latest, at `timestamp()` - latest where no record is that
    new - or `args.to_offset`), written by `write` with --execute, else a dry run."""
    client = _client(args)
    try:
        parts = _partitions(client, [args.topic])
        at = None if args.to_earliest or args.to_latest else timestamp()
        if args.to_earliest:
            new = _list_offsets(client, parts, -2)
        elif args.to_latest:
            new = _list_offsets(client, parts, -1)
        elif at is not None:
            new = _list_offsets(client, parts, at)
            latest = _list_offsets(client, parts, -1)
            new = {k: (v if v >= 0 else latest[k]) for k, v in new.items()}
        else:
            if args.to_offset < 0 and not negative_offset_ok:
                raise AdminError(f"invalid offset {args.to_offset}")
            new = {(args.topic, p): args.to_offset for p in parts[args.topic]}
        if args.execute:
            write(client, new)
    finally:
        client.close()
    rows = [(args.group, t, p, o) for (t, p), o in sorted(new.items())]
    out = emit(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, args.json)
    if not args.execute and not args.json:
        out += f"\n\n(dry run: nothing changed; add --execute to {execute_note})"
    return out


def add_group_tool(sub: Any, name: str, help: str, dest: str,
                   cmd_list: Callable[[argparse.Namespace], str],
                   cmd_describe: Callable[[argparse.Namespace], str]) -> tuple[Any, Any]:
    """The `name` command (connection options, --json) with its `list` and
    `describe <group>` subcommands; returns (its subcommands, the describe parser)."""
    tool = sub.add_parser(name, help=help)
    add_arguments(tool)
    tool.add_argument("--json", action="store_true", help="machine-readable output")
    commands = tool.add_subparsers(dest=dest, required=True)
    commands.add_parser("list").set_defaults(func=cmd_list)
    describe = commands.add_parser("describe")
    describe.add_argument("group")
    describe.set_defaults(func=cmd_describe)
    return commands, describe


def add_group_command(commands: Any, name: str,
                      func: Callable[[argparse.Namespace], str]) -> Any:
    """A `<name> <group>` subcommand; returns its parser."""
    parser = commands.add_parser(name)
    parser.add_argument("group")
    parser.set_defaults(func=func)
    return parser


def add_reset_offsets_parser(sub: Any, func: Callable[[argparse.Namespace], str],
                             by_duration: bool = False) -> None:
    r = add_group_command(sub, "reset-offsets", func)
    r.add_argument("--topic", required=True)
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--to-datetime", help="ISO-8601, e.g. 2026-01-01T00:00:00")
    if by_duration:
        how.add_argument("--by-duration", help="ISO-8601 duration back from now, e.g. PT1H")
    r.add_argument("--execute", action="store_true")


def cmd_reset_offsets(args: argparse.Namespace) -> str:
    def commit(client: RawClient, new: Offsets) -> None:
        resp = client.request(8, 8, {
            "group_id": args.group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": args.topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for (_, p), o in sorted(new.items())]}]})
        errors = [p.error_code.name for t in resp.topics for p in t.partitions
                  if int(p.error_code)]
        if errors:
            raise AdminError(f"reset failed ({', '.join(sorted(set(errors)))}); "
                             "is the group still active?")

    return reset_offsets(
        args, lambda: _to_millis(args.to_datetime) if args.to_datetime is not None else None,
        commit, "commit these offsets")


def add_parser(sub: Any) -> None:
    commands, _ = add_group_tool(sub, "groups", "list, describe, delete and reset consumer "
                                 "groups", "groups_command", cmd_list, cmd_describe)
    add_group_command(commands, "delete", cmd_delete)
    add_reset_offsets_parser(commands, cmd_reset_offsets)
