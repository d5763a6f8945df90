"""A configuration key's declaration: `Setting`, with Kafka's ConfigDef types."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Type(StrEnum):
    """Kafka's ConfigDef.Type (SHORT is declared as INT here)."""

    BOOLEAN = "BOOLEAN"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    LIST = "LIST"
    PASSWORD = "PASSWORD"
    CLASS = "CLASS"


class Scope(StrEnum):
    """Which config resource a key belongs to."""

    BROKER = "broker"
    TOPIC = "topic"
    BOTH = "both"  # one name for the topic key and the broker default (compression.type)
    GROUP = "group"
    CLIENT_METRICS = "client-metrics"


@dataclass(frozen=True, slots=True)
class Setting:
    """One configuration key, declared once.

    `default` is a string as in a properties file: "" is an empty default (the key is
    described, with no value), None no default at all (the key is absent unless set).
    A topic key with a `synonym` takes its default from that broker key; its own
    `default` is then the fallback when the broker key is empty (flush.ms).
    """

    name: str
    type: Type
    default: str | None
    doc: str
    scope: Scope = Scope.BROKER
    #: AlterConfigs may change it at runtime (topic keys and group keys always may).
    dynamic: bool = False
    #: Secret: described as Kafka does, with no value (PASSWORD keys always are).
    sensitive: bool = False
    #: A topic key's broker default (Kafka's LogConfig synonym).
    synonym: str | None = None
    #: A broker key that sets a topic key's default in another unit (log.retention.hours).
    unit_of: str | None = None
    #: Dynamic in Kafka, accepted and stored here without effect (docs/differences.md).
    stored: bool = False
    #: ConfigDef's range (validated for dynamic values).
    at_least: int | None = None
    at_most: int | None = None
    #: ConfigDef's ValidString / ValidList, in the order Kafka's message names them.
    valid: tuple[str, ...] = ()

    @property
    def is_sensitive(self) -> bool:
        return self.sensitive or self.type is Type.PASSWORD

    @property
    def is_topic(self) -> bool:
        return self.scope in (Scope.TOPIC, Scope.BOTH)

    @property
    def is_broker(self) -> bool:
        return self.scope in (Scope.BROKER, Scope.BOTH)


def topic(name: str, type_: Type, synonym: str | None, doc: str, *,
          default: str | None = None, at_least: int | None = None,
          at_most: int | None = None, valid: tuple[str, ...] = ()) -> Setting:
    """A topic key (always dynamic) defaulting to broker key `synonym`."""
    return Setting(name, type_, default, doc, Scope.TOPIC, dynamic=True, synonym=synonym,
                   at_least=at_least, at_most=at_most, valid=valid)


def both(name: str, type_: Type, default: str, doc: str, *, at_least: int | None = None,
         at_most: int | None = None, valid: tuple[str, ...] = ()) -> Setting:
    """A topic key whose broker default has the same name (dynamic on both)."""
    return Setting(name, type_, default, doc, Scope.BOTH, dynamic=True, at_least=at_least,
                   at_most=at_most, valid=valid)
