"""`headwater configs describe|alter --client-quota user=U,client-id=C`: client quotas
(KIP-546) over the wire client: DescribeClientQuotas v1 (the exact entity, strict) and
AlterClientQuotas v1 (`--set KEY=VALUE`, `--delete KEY`). An empty name (`user=`) or
`<default>` is the entity type's default, as kafka-configs' `--entity-default`."""

from __future__ import annotations

import argparse
import json

from .groups import AdminError
from .tables import emit
from .wire_errors import check, open_client, request

ENTITY_TYPES = ("user", "client-id", "ip")
EXACT, DEFAULT = 0, 1
HINT = "quota keys: producer_byte_rate, consumer_byte_rate, request_percentage, " \
       "controller_mutation_rate, connection_creation_rate (ip)"

Entity = tuple[tuple[str, str | None], ...]


def parse_entity(text: str) -> Entity:
    out: list[tuple[str, str | None]] = []
    for part in text.split(","):
        kind, sep, name = part.partition("=")
        kind = kind.strip()
        if not sep or kind not in ENTITY_TYPES:
            raise argparse.ArgumentTypeError(
                f"expected {'|'.join(ENTITY_TYPES)}=NAME[,...], got {text!r}")
        name = name.strip()
        out.append((kind, None if name in ("", "<default>") else name))
    return tuple(sorted(out))


def label(entity: Entity) -> str:
    return ",".join(f"{k}={'<default>' if n is None else n}" for k, n in entity)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def describe(args: argparse.Namespace) -> str:
    entity: Entity = args.client_quota
    client = open_client(args)
    try:
        resp = request(client, (48, 1, "DescribeClientQuotas"), {"components": [
            {"entity_type": k, "match_type": EXACT if n is not None else DEFAULT,
             "match": n} for k, n in entity], "strict": True}, args)
    finally:
        client.close()
    check(int(resp.error_code), resp.error_message, args, f"client quota {label(entity)}",
          "check --client-quota (user=U,client-id=C,ip=A)")
    rows = sorted((v.key, _number(v.value), label(entity))
                  for e in resp.entries or ()
                  if tuple(sorted((c.entity_type, c.entity_name) for c in e.entity)) == entity
                  for v in e.values)
    return emit(["NAME", "VALUE", "ENTITY"], rows, args.json)


def alter(args: argparse.Namespace) -> str:
    entity: Entity = args.client_quota
    ops = []
    for key, value in args.set:
        try:
            ops.append({"key": key, "value": float(value), "remove": False})
        except ValueError:
            raise AdminError(f"quota {key}: {value!r} is not a number; hint: {HINT}") \
                from None
    ops += [{"key": key, "value": 0.0, "remove": True} for key in args.delete]
    client = open_client(args)
    try:
        resp = request(client, (49, 1, "AlterClientQuotas"), {"entries": [{
            "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
            "ops": ops}], "validate_only": False}, args)
    finally:
        client.close()
    result = resp.entries[0]
    check(int(result.error_code), result.error_message, args,
          f"client quota {label(entity)}", HINT)
    if args.json:
        return json.dumps({"entity": label(entity), "set": dict(args.set),
                           "deleted": args.delete})
    return f"altered {len(ops)} quota(s) of {label(entity)}"
