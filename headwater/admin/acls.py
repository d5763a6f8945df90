"""`headwater acls create|list|delete`: ACLs with Kafka's kafka-acls options
(`--allow-principal`/`--deny-principal`, `--operation`, `--topic`/`--group`/`--cluster`/
`--transactional-id`, `--resource-pattern-type`, `--host`), through confluent-kafka's
AdminClient (CreateAcls, DeleteAcls; DescribeAcls over the wire client, as librdkafka
drops its error code), so against any Kafka-compatible broker with an authorizer.

create adds one ACL per principal x operation x resource; list and delete take the same
options as a filter (no resource: every resource; `--principal` matches either
permission; `--resource-pattern-type match` also selects the prefixed and wildcard ACLs
that apply to a name).
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from . import rdkafka
from .connect import add_arguments
from .groups import AdminError
from .tables import emit
from .wire_errors import check, open_client, request

TIMEOUT_S = 30.0
CLUSTER_NAME = "kafka-cluster"
#: kafka-acls' operation names
OPERATIONS = {"All": AclOperation.ALL, "Read": AclOperation.READ,
              "Write": AclOperation.WRITE, "Create": AclOperation.CREATE,
              "Delete": AclOperation.DELETE, "Alter": AclOperation.ALTER,
              "Describe": AclOperation.DESCRIBE, "ClusterAction": AclOperation.CLUSTER_ACTION,
              "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
              "AlterConfigs": AclOperation.ALTER_CONFIGS,
              "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE}
_OPERATION_NAMES = {k.lower(): k for k in OPERATIONS}
PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED,
            "match": ResourcePatternType.MATCH, "any": ResourcePatternType.ANY}
HEADERS = ["PRINCIPAL", "PERMISSION", "OPERATION", "HOST", "RESOURCE", "NAME", "PATTERN"]


def _operation(text: str) -> str:
    try:
        return _OPERATION_NAMES[text.replace("_", "").replace("-", "").lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown operation {text!r} (one of {', '.join(OPERATIONS)})") from None


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.BROKER, CLUSTER_NAME))  # librdkafka's BROKER is CLUSTER
    return out


def _principals(args: argparse.Namespace) -> list[tuple[str | None, AclPermissionType]]:
    out = [(p, AclPermissionType.ALLOW) for p in args.allow_principal]
    out += [(p, AclPermissionType.DENY) for p in args.deny_principal]
    out += [(p, AclPermissionType.ANY) for p in getattr(args, "principal", [])]
    return out


def _admin(args: argparse.Namespace) -> AdminClient:
    admin = rdkafka.make(AdminClient, rdkafka.config(args))
    try:  # an unreachable broker fails fast
        admin.list_topics(timeout=rdkafka.CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args) from None
    return admin


def _explain(exc: Exception, args: argparse.Namespace) -> AdminError:
    error = rdkafka.explain(exc, args, "acls")
    text = str(error)
    if "SECURITY_DISABLED" in text:
        return AdminError(f"{text}; hint: the broker has no authorizer "
                          "(authorizer.class.name)")
    if "hint:" not in text:
        return AdminError(f"{text}; hint: check the principal (User:NAME), the operation "
                          "and the resource options")
    return error


def _row(b: Any) -> tuple[str, ...]:
    kind = "CLUSTER" if b.restype == ResourceType.BROKER else b.restype.name
    return (b.principal, b.permission_type.name, b.operation.name, b.host, kind, b.name,
            b.resource_pattern_type.name)


def _filters(args: argparse.Namespace) -> list[Any]:
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or \
        [(ResourceType.ANY, None)]
    pattern = PATTERNS[args.resource_pattern_type or "any"] \
        if resources[0][0] == ResourceType.ANY else PATTERNS[args.resource_pattern_type
                                                             or "literal"]
    principals = _principals(args) or [(None, AclPermissionType.ANY)]
    operations = [OPERATIONS[o] for o in args.operation] or [AclOperation.ANY]
    make: Any = AclBindingFilter  # its stubs say str where None means any
    return [make(rtype, name, pattern, principal, args.host, op, perm)
            for (rtype, name), (principal, perm), op
            in itertools.product(resources, principals, operations)]


def cmd_create(args: argparse.Namespace) -> str:
    resources, principals = _resources(args), _principals(args)
    if not resources or not principals:
        raise AdminError("an ACL needs a resource and a principal; hint: --topic/--group/"
                         "--cluster/--transactional-id and --allow-principal/"
                         "--deny-principal User:NAME")
    pattern = args.resource_pattern_type or "literal"
    if pattern not in ("literal", "prefixed"):
        raise AdminError(f"an ACL's pattern is literal or prefixed, not {pattern}; hint: "
                         "match and any are filters (list, delete)")
    operations = args.operation or ["All"]
    make: Any = AclBinding
    bindings = [make(rtype, name, PATTERNS[pattern], principal, args.host or "*",
                           OPERATIONS[op], perm)
                for (rtype, name), (principal, perm), op
                in itertools.product(resources, principals, operations)]
    admin = _admin(args)
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        try:
            future.result(TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise _explain(exc, args) from None
    return emit(HEADERS, [_row(b) for b in bindings], args.json)


def cmd_list(args: argparse.Namespace) -> str:
    """DescribeAcls over the wire client: librdkafka drops the response's error code (a
    refused principal would see an empty list)."""
    client = open_client(args)
    found: set[tuple[str, ...]] = set()
    try:
        for f in _filters(args):
            resp = request(client, (29, 3, "DescribeAcls"), {
                "resource_type_filter": f.restype.value, "resource_name_filter": f.name,
                "pattern_type_filter": f.resource_pattern_type.value,
                "principal_filter": f.principal, "host_filter": f.host,
                "operation": f.operation.value, "permission_type": f.permission_type.value},
                args)
            check(int(resp.error_code), resp.error_message, args, "acls",
                  "an ACL refuses this principal (check --command-config and the "
                  "broker's ACLs)")
            found.update(_row(AclBinding(int(r.resource_type), r.resource_name,
                                         int(r.pattern_type), a.principal, a.host,
                                         int(a.operation), int(a.permission_type)))
                         for r in resp.resources for a in r.acls)
    finally:
        client.close()
    return emit(HEADERS, sorted(found), args.json)


def cmd_delete(args: argparse.Namespace) -> str:
    if not _resources(args) and args.resource_pattern_type != "any":
        raise AdminError("which ACLs? hint: name a resource (--topic/--group/--cluster/"
                         "--transactional-id), or --resource-pattern-type any for all")
    admin = _admin(args)
    deleted: set[AclBinding] = set()
    for future in admin.delete_acls(_filters(args), request_timeout=TIMEOUT_S).values():
        try:
            deleted.update(future.result(TIMEOUT_S))
        except Exception as exc:  # noqa: BLE001
            raise _explain(exc, args) from None
    return emit(HEADERS, sorted(_row(b) for b in deleted), args.json)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="create, list and delete ACLs (like kafka-acls)")
    asub = p.add_subparsers(dest="acls_command", required=True)
    for name, func, help_text in (
            ("create", cmd_create, "add ACLs: principals x operations x resources"),
            ("list", cmd_list, "ACLs matching the options (none: every ACL)"),
            ("delete", cmd_delete, "delete the ACLs matching the options; prints them")):
        c = asub.add_parser(name, help=help_text)
        add_arguments(c)
        c.add_argument("--json", action="store_true", help="JSON output")
        c.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
        c.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
        if name != "create":
            c.add_argument("--principal", action="append", default=[], metavar="User:NAME",
                           help="either permission")
        c.add_argument("--operation", action="append", default=[], type=_operation,
                       choices=list(OPERATIONS),
                       help="repeatable; create's default: All")
        c.add_argument("--host", default=None,
                       help="the client host (create's default: * for every host)")
        c.add_argument("--topic", action="append", default=[], metavar="NAME")
        c.add_argument("--group", action="append", default=[], metavar="NAME")
        c.add_argument("--transactional-id", action="append", default=[], metavar="ID")
        c.add_argument("--cluster", action="store_true", help="the cluster resource")
        c.add_argument("--resource-pattern-type", choices=list(PATTERNS),
                       help="create: literal (default) or prefixed; list/delete filters "
                            "also take match and any")
        c.set_defaults(func=func)
