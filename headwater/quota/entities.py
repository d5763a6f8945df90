"""Client-quota entities and keys: AlterClientQuotas' validation and DescribeClientQuotas'
filter, as Kafka 4.3's controller (ClientQuotaControlManager) and image
(ClientQuotasImage.describe) do them.

An entity is a tuple of (type, name) pairs sorted by type; a None name is the type's
default (`<default>` in kafka-configs). Types: user, client-id (together or alone) and ip
(alone). Keys: producer_byte_rate and consumer_byte_rate (whole numbers),
request_percentage and controller_mutation_rate for users and clients;
connection_creation_rate for ips.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode as E

from ..metadata.records import ClientQuotaRecord

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> must be a whole number (Kafka's LONG / INT keys) or not (DOUBLE)
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
               REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {CONNECTION_CREATION_RATE: True}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
Quotas = Mapping[Entity, Mapping[str, float]]


class QuotaError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_text(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString, for messages."""
    return "ClientQuotaEntity(entries={" + ", ".join(
        f"{t}={n}" for t, n in entity) + "})"


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: tuple[tuple[str, str | None], ...]  # as sent (unsorted, maybe duplicated)
    ops: tuple[tuple[str, float | None], ...]  # (key, value); None removes


def _validated(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    seen: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in seen:
            raise QuotaError(E.invalid_request, "Invalid empty client quota entity, duplicate "
                             f"entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(E.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise QuotaError(E.invalid_request, f"Empty {kind} not supported")
        seen[kind] = name
    if not seen:
        raise QuotaError(E.invalid_request, "Invalid empty client quota entity")
    return tuple(sorted(seen.items(), key=_by_type))


def _by_type(pair: tuple[str, str | None]) -> str:
    return pair[0]


def _keys_for(entity: Entity) -> dict[str, bool]:
    kinds = {k for k, _ in entity}
    if IP in kinds:
        if kinds != {IP}:
            raise QuotaError(E.invalid_request, "Invalid empty client quota entity")
        ip = dict(entity)[IP]
        if ip is not None and not _resolvable(ip):
            raise QuotaError(E.invalid_request, f"{ip} is not a valid IP or resolvable host.")
        return IP_KEYS
    return CLIENT_KEYS


def _resolvable(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except OSError:
        return False


def _check_value(keys: Mapping[str, bool], key: str, value: float) -> None:
    whole = keys.get(key)
    if whole is None:
        raise QuotaError(E.invalid_request, f"Invalid configuration key {key}")
    if whole and abs(int(value + 1e-6) - value) > 1e-6:
        raise QuotaError(E.invalid_request, f"{key} cannot be a fractional value.")


def alter(quotas: Quotas, alterations: Iterable[Alteration]
          ) -> tuple[list[ClientQuotaRecord], list[tuple[int, str | None]]]:
    """The records for `alterations` and one (error code, message) per alteration; an
    alteration in error contributes no records. Removing a key that is not set writes
    nothing, setting a key to its value writes nothing (as Kafka)."""
    records: list[ClientQuotaRecord] = []
    results: list[tuple[int, str | None]] = []
    done: set[Entity] = set()
    for alt in alterations:
        try:
            ops: dict[str, float | None] = {}
            for key, value in alt.ops:
                if key in ops:
                    raise QuotaError(E.invalid_request, f"Duplicate quota key {key} not "
                                     f"updating quota for this entity "
                                     f"{entity_text(tuple(alt.entity))}")
                ops[key] = value
            if tuple(sorted(alt.entity, key=_by_type)) in done:
                raise QuotaError(E.invalid_request, "Ignoring duplicate entity "
                                 f"{entity_text(tuple(alt.entity))}")
            entity = _validated(alt.entity)
            done.add(entity)
            keys = _keys_for(entity)
            current = quotas.get(entity, {})
            mine = []
            for key, value in ops.items():
                if value is None:
                    if key in current:
                        mine.append(ClientQuotaRecord(entity, key, 0.0, True))
                    continue
                _check_value(keys, key, value)
                if current.get(key) != value:
                    mine.append(ClientQuotaRecord(entity, key, float(value)))
        except QuotaError as exc:
            results.append((exc.code, exc.message))
            continue
        records += mine
        results.append((0, None))
    return records, results


def describe(quotas: Quotas, components: Iterable[tuple[str, int, str | None]],  # noqa: C901
             strict: bool) -> list[tuple[Entity, Mapping[str, float]]]:
    """DescribeClientQuotas' filter: exact names, defaults, or any name of a type;
    `strict` keeps only entities with no other types. QuotaError for a bad filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            raise QuotaError(E.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise QuotaError(E.invalid_request, f"Entity type {kind} cannot appear more than "
                             "once in the filter.")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(E.unsupported_version, f"Unsupported entity type {kind}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(E.invalid_request, "Request specified MATCH_TYPE_EXACT, but "
                                 "set match string to null.")
            exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(E.invalid_request, "Request specified MATCH_TYPE_DEFAULT, "
                                 "but also specified a match string.")
            exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError(E.invalid_request, "Request specified MATCH_TYPE_SPECIFIED, "
                                 "but also specified a match string.")
            typed.add(kind)
        else:
            raise QuotaError(E.invalid_request, f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise QuotaError(E.invalid_request, "Invalid entity filter component combination. IP "
                         "filter component should not be used with user or clientId filter "
                         "component.")
    if not exact and not typed and strict:
        return []
    out = []
    for entity, values in quotas.items():
        names = dict(entity)
        if any(k not in names or names[k] != v for k, v in exact.items()):
            continue
        if any(k not in names for k in typed):
            continue
        if strict and len(names) != len(exact) + len(typed):
            continue
        out.append((entity, values))
    return out
