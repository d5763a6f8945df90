"""`headwater configs describe|alter`: the configs of a broker (`--broker ID`), of every
broker (`--broker-default`), of a topic or of a group, and client quotas
(`--client-quota user=U,client-id=C`, in quotas.py), like Kafka's kafka-configs tool.

Exact requests over the wire client (DescribeConfigs v4, IncrementalAlterConfigs v1), so
they work the same against headwater and Apache Kafka: describe shows each config's
value, source, and whether it is sensitive (its value hidden) or read-only; alter sets
and deletes keys incrementally (a deleted key falls back to its default).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..wire.client import RawClient
from . import quotas
from .connect import _key_value, add_arguments, security
from .groups import AdminError
from .tables import emit
from .wire_errors import check, open_client, request

TOPIC, BROKER, GROUP = 2, 4, 32
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC", 2: "DYNAMIC_BROKER", 3: "DYNAMIC_DEFAULT_BROKER",
           4: "STATIC_BROKER", 5: "DEFAULT", 6: "DYNAMIC_BROKER_LOGGER",
           7: "CLIENT_METRICS", 8: "GROUP"}
SET, DELETE = 0, 1
HEADERS = ["NAME", "VALUE", "SOURCE", "SENSITIVE", "READ-ONLY"]


def resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resource type, resource name, what the error messages call it)."""
    if args.topic is not None:
        return TOPIC, args.topic, f"topic {args.topic}"
    if args.group is not None:
        return GROUP, args.group, f"group {args.group}"
    if args.broker is not None:
        return BROKER, str(args.broker), f"broker {args.broker}"
    return BROKER, "", "broker default"


def _client(args: argparse.Namespace, rtype: int, name: str) -> RawClient:
    """A broker's own configs are asked of that broker (as Kafka's AdminClient does);
    the rest of any broker."""
    client = open_client(args)
    if rtype != BROKER or not name:
        return client
    meta = request(client, (3, 12, "Metadata"), {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}, args)
    for b in meta.brokers:
        if b.node_id == int(name):
            try:
                direct = RawClient(b.host, b.port, security=security(args))
            except OSError:
                return client  # an advertised address not reachable from here
            client.close()
            return direct
    client.close()
    raise AdminError(f"broker {name} is not in the cluster; hint: `headwater cluster info` "
                     "lists the brokers")


def cmd_describe(args: argparse.Namespace) -> str:
    if args.client_quota is not None:
        return quotas.describe(args)
    rtype, name, subject = resource(args)
    client = _client(args, rtype, name)
    try:
        resp = request(client, (32, 4, "DescribeConfigs"), {
            "resources": [{"resource_type": rtype, "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}, args)
    finally:
        client.close()
    result = resp.results[0]
    check(int(result.error_code), result.error_message, args, subject,
          "check the name (`headwater topic list`, `headwater cluster info`)")
    rows = sorted((c.name, None if c.is_sensitive else c.value,
                   SOURCES.get(int(c.config_source), str(c.config_source)),
                   c.is_sensitive, c.read_only) for c in result.configs)
    if args.json:
        return emit(HEADERS, rows, True)
    return emit(HEADERS, [(n, v, s, "yes" if sens else "no", "yes" if ro else "no")
                          for n, v, s, sens, ro in rows], False)


def cmd_alter(args: argparse.Namespace) -> str:
    if not args.set and not args.delete:
        raise AdminError("nothing to change; hint: --set KEY=VALUE or --delete KEY")
    if args.client_quota is not None:
        return quotas.alter(args)
    rtype, name, subject = resource(args)
    ops = [{"name": k, "config_operation": SET, "value": v} for k, v in args.set]
    ops += [{"name": k, "config_operation": DELETE, "value": None} for k in args.delete]
    client = _client(args, rtype, name)
    try:
        resp = request(client, (44, 1, "IncrementalAlterConfigs"), {
            "resources": [{"resource_type": rtype, "resource_name": name, "configs": ops}],
            "validate_only": False}, args)
    finally:
        client.close()
    result = resp.responses[0]
    check(int(result.error_code), result.error_message, args, subject,
          "check the key and value (`headwater configs describe`)")
    if args.json:
        return json.dumps({"resource": subject, "set": dict(args.set),
                           "deleted": args.delete})
    return f"altered {len(ops)} config(s) of {subject}"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter broker, topic and group configs "
                                       "and client quotas (like kafka-configs)")
    csub = p.add_subparsers(dest="configs_command", required=True)
    for name, func, help_text in (
            ("describe", cmd_describe, "each config's value, source, sensitive, read-only"),
            ("alter", cmd_alter, "set and delete configs (IncrementalAlterConfigs) or "
                                 "client quotas (AlterClientQuotas)")):
        c = csub.add_parser(name, help=help_text)
        add_arguments(c)
        c.add_argument("--json", action="store_true", help="JSON output")
        which = c.add_mutually_exclusive_group(required=True)
        which.add_argument("--broker", type=int, metavar="ID", help="one broker's configs")
        which.add_argument("--broker-default", action="store_true",
                           help="the cluster-wide default of every broker")
        which.add_argument("--topic", metavar="NAME")
        which.add_argument("--group", metavar="NAME", help="a consumer or share group")
        which.add_argument("--client-quota", type=quotas.parse_entity, metavar="ENTITY",
                           help="user=U,client-id=C,ip=A (an empty name: the default)")
        c.set_defaults(func=func)
        if name == "alter":
            c.add_argument("--set", action="append", type=_key_value, default=[],
                           metavar="KEY=VALUE", help="set a key (repeatable)")
            c.add_argument("--delete", action="append", default=[], metavar="KEY",
                           help="delete a key: back to its default (repeatable)")
