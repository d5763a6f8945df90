"""Option parsing and validation, with the names, defaults and error texts of Spark's Kafka
connector, so a job ports by changing ``format("kafka")`` to ``format("headwater")``.

Everything here is pure (no network, no Spark session): the data source is instantiated
several times per query in different Python processes, and validation must fail at
planning time (``load()`` / ``save()`` / ``start()``) with a message naming the option,
never later on an executor.

Spark hands options over as a case-insensitive dict; we work on lower-cased keys and keep
Spark's camelCase spelling only for messages.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.wire.client_properties import SecurityConfigError, to_librdkafka, understood
from headwater.wire.client_security import ClientSecurity

log = logging.getLogger("pyspark_headwater")

EARLIEST = -2  # Spark's JSON sentinels in startingOffsets / endingOffsets
LATEST = -1

TopicPartition = tuple[str, int]


class HeadwaterOptionError(ValueError):
    """An unknown, malformed or contradictory option; the message names the option."""


# Spelling used in messages; the keys are what Spark gives us (lower-cased).
SOURCE_OPTIONS = {k.lower(): k for k in (
    "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "endingOffsets", "endingTimestamp",
    "endingOffsetsByTimestamp", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "failOnDataLoss",
    "includeHeaders", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "groupIdPrefix",
    # headwater extension: commit progress to kafka.group.id (default: when it is set)
    "commitOffsets",
    # headwater extension: how executors read records, "native" (default) or "librdkafka"
    "decoder",
    # headwater extension: history from the topic's Iceberg table, then the topic
    # (table_history.py; the catalog in iceberg.* options)
    "historyFromTable",
    # Spark adds this one itself when load(path) is used; it means nothing to us.
    "path",
)}
SINK_OPTIONS = {k.lower(): k for k in (
    "kafka.bootstrap.servers", "topic", "includeHeaders", "exactlyOnce",
    "transactionalIdPrefix",
    # Spark adds these itself for writes.
    "checkpointLocation", "path", "queryName",
)}
# Spellings of other sources' options (the share-group source registers its own).
EXTRA_NAMES: dict[str, str] = {}
STRATEGIES = ("assign", "subscribe", "subscribepattern")
_STRATEGY_NAMES = "assign, subscribe, subscribePattern"

# Client properties Spark refuses, with its reasons (KafkaSourceProvider).
_FORBIDDEN_SOURCE_KAFKA = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
        "Streaming manages which offsets are consumed internally."),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are returned as byte "
        "arrays. Use DataFrame operations to explicitly deserialize the keys."),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are returned as byte "
        "arrays. Use DataFrame operations to explicitly deserialize the values."),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
    "enable.partition.eof": "Kafka option 'enable.partition.eof' is managed by the source",
}
_FORBIDDEN_SINK_KAFKA = {
    "key.serializer": ("Kafka option 'key.serializer' is not supported as keys are written "
                       "as byte arrays (string keys are encoded as UTF-8)."),
    "value.serializer": ("Kafka option 'value.serializer' is not supported as values are "
                         "written as byte arrays (string values are encoded as UTF-8)."),
    "transactional.id": ("Kafka option 'transactional.id' is not supported: set "
                         "'exactlyOnce' to 'true' (and optionally 'transactionalIdPrefix')"),
}


def _fail(message: str) -> HeadwaterOptionError:
    return HeadwaterOptionError(message)


def parse_bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        name = SOURCE_OPTIONS.get(key) or SINK_OPTIONS.get(key) or EXTRA_NAMES.get(key, key)
        raise _fail(f"Option '{name}' must be 'true' or 'false', got '{raw}'")
    return value == "true"


def parse_int(opts: Mapping[str, str], key: str, minimum: int | None = None) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    name = SOURCE_OPTIONS.get(key) or SINK_OPTIONS.get(key) or EXTRA_NAMES.get(key, key)
    try:
        value = int(raw.strip())
    except ValueError:
        raise _fail(f"Option '{name}' must be an integer, got '{raw}'") from None
    if minimum is not None and value < minimum:
        raise _fail(f"Option '{name}' must be at least {minimum}, got {value}")
    return value


_DURATION = re.compile(r"^\s*(-?\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"us": 0.001, "ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000,
            "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: str, name: str) -> int:
    """Spark's ``timeStringAsMs``: ``15m``, ``30s``, ``500ms``; a bare number is ms."""
    m = _DURATION.match(raw)
    if not m:
        raise _fail(f"Option '{name}' must be a duration such as '15m', '30s' or '500ms', "
                    f"got '{raw}'")
    unit = m.group(2).lower() if m.group(2) else None
    return int(int(m.group(1)) * _UNIT_MS[unit])


def _json_object(raw: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _fail(f"Option '{name}' is not valid JSON ({exc.msg}): {raw}") from None
    if not isinstance(value, dict):
        raise _fail(f"Option '{name}' must be a JSON object like "
                    f'{{"topicA":{{"0":23,"1":-1}}}}, got: {raw}')
    return value


def parse_partition_numbers(raw: str, name: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 42, "1": -2}}`` (offsets or timestamps) -> {(topic, 0): 42, ...}."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise _fail(f"Option '{name}': topic '{topic}' must map partitions to numbers, "
                        f"like {{\"{topic}\":{{\"0\":23}}}}")
        for part, value in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise _fail(f"Option '{name}': partition '{part}' of topic '{topic}' is "
                            "not an integer") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(f"Option '{name}': value for {topic}-{p} must be an integer, "
                            f"got {value!r}")
            out[(topic, p)] = value
    return out


def parse_assign(raw: str) -> list[TopicPartition]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> [(topicA, 0), ...] (Spark's ``assign``)."""
    if not raw.strip().startswith("{"):
        raise _fail(f"No topicpartitions to assign as specified value for option 'assign' "
                    f"is '{raw}'")
    out: list[TopicPartition] = []
    for topic, parts in _json_object(raw, "assign").items():
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise _fail(f"Option 'assign': topic '{topic}' must map to a list of partition "
                        f"numbers, like {{\"{topic}\":[0,1]}}")
        out += [(topic, p) for p in parts]
    if not out:
        raise _fail(f"No topicpartitions to assign as specified value for option 'assign' "
                    f"is '{raw}'")
    return sorted(set(out))


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark-Kafka offset JSON, topics and partitions in a fixed (numeric) order so equal
    offsets serialise to equal strings (the engine compares them as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part) in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in value.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: one of Spark's four forms, resolved later on the
    driver against the broker (``ListOffsets``)."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # "offsets"/"timestamps"
    timestamp: int = 0  # "timestamp": one for every partition


def _offset_spec(opts: Mapping[str, str], ts_key: str, by_ts_key: str, off_key: str,
                 default: str) -> OffsetSpec:
    """Spark's preference order: global timestamp, per-partition timestamps, offsets."""
    if ts_key in opts:
        raw = opts[ts_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(raw))
        except ValueError:
            raise _fail(f"Option '{SOURCE_OPTIONS[ts_key]}': expected a single long value "
                        f"(epoch milliseconds), got '{raw}'") from None
    if by_ts_key in opts:
        return OffsetSpec("timestamps",
                          offsets=parse_partition_numbers(opts[by_ts_key],
                                                          SOURCE_OPTIONS[by_ts_key]))
    given = opts.get(off_key)
    if given is None:
        return OffsetSpec(default)
    word = given.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)
    return OffsetSpec("offsets", offsets=parse_partition_numbers(given, SOURCE_OPTIONS[off_key]))


@dataclass(frozen=True)
class SourceOptions:
    """The validated source options; picklable, shipped to the stream runner and executors."""

    bootstrap: str
    strategy: str  # "assign" | "subscribe" | "subscribepattern"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    no_match_strategy: str = "error"  # startingOffsetsByTimestampStrategy
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    group_id: str | None = None
    commit_offsets: bool = False
    poll_timeout_ms: int = 120_000
    decoder: str = "native"
    kafka: tuple[tuple[str, str], ...] = ()  # kafka.* pass-through (prefix removed)
    #: historyFromTable: the tables' catalog properties (iceberg.* without the prefix)
    history_table: tuple[tuple[str, str], ...] | None = None

    @property
    def client_config(self) -> dict[str, str | int | float | bool]:  # confluent-kafka's config type
        """Pass-through client properties (``kafka.`` stripped), bootstrap included."""
        return {**dict(self.kafka), "bootstrap.servers": self.bootstrap}

    @property
    def security(self) -> ClientSecurity:
        """TLS and SASL settings for the connector's own sockets (native reader, share
        group), from the same properties confluent-kafka gets."""
        return ClientSecurity.from_config(dict(self.kafka))


DECODERS = ("native", "librdkafka")


def _decoder(opts: Mapping[str, str]) -> str:
    value = opts.get("decoder", "native").strip().lower()
    if value not in DECODERS:
        raise _fail(f"Option 'decoder' must be one of {', '.join(DECODERS)}, "
                    f"got '{opts['decoder']}'")
    return value


def _kafka_props(opts: Mapping[str, str]) -> dict[str, str]:
    """The kafka.* properties, prefix removed, with Kafka's Java security names
    (``sasl.jaas.config``, ``ssl.truststore.location``, ...) mapped onto librdkafka's
    (``sasl.username``, ``ssl.ca.location``, ...) so confluent-kafka accepts them."""
    props = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    try:
        mapped = to_librdkafka(props)
        if understood(mapped):  # otherwise librdkafka judges them (check_client_properties)
            ClientSecurity.from_config(mapped)
    except SecurityConfigError as exc:
        raise _fail(f"Invalid kafka.* security option: {exc}") from None
    return mapped


def _client_props(opts: Mapping[str, str], forbidden: Mapping[str, str],
                  client: str) -> tuple[dict[str, str], str]:
    """The kafka.* pass-through properties without bootstrap.servers, and the bootstrap
    servers; Spark's errors for a refused property or a missing bootstrap."""
    kafka = _kafka_props(opts)
    for key, message in forbidden.items():
        if key in kafka:
            raise _fail(message)
    bootstrap = kafka.pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise _fail("Option 'kafka.bootstrap.servers' must be specified for configuring the "
                    f"Kafka {client}")
    return kafka, bootstrap


def _check_unknown(opts: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    for key in opts:
        if key.startswith("kafka.") or (key.startswith("iceberg.") and "historyfromtable"
                                        in known):
            continue
        if key not in known:
            raise _fail(f"Unknown {what} option '{key}' for format 'headwater'. Known options: "
                        + ", ".join(sorted(known.values())) + ", and kafka.* client properties")


def parse_source_options(opts: Mapping[str, str], streaming: bool | None = None  # noqa: C901
                         ) -> SourceOptions:
    """Validate source options like Spark's ``KafkaSourceProvider``.

    ``streaming`` is None when the caller (``DataSource.schema``) cannot know yet whether
    the read is a batch or a stream; the mode-specific checks run again once it is known.
    """
    opts = {k.lower(): v for k, v in opts.items()}
    _check_unknown(opts, SOURCE_OPTIONS, "source")
    chosen = [k for k in STRATEGIES if k in opts]
    if not chosen:
        raise _fail("One of the following options must be specified for the headwater "
                    f"source: {_STRATEGY_NAMES}. See the docs for more details.")
    if len(chosen) > 1:
        raise _fail("Only one of the following options can be specified for the headwater "
                    f"source: {_STRATEGY_NAMES} (got {', '.join(SOURCE_OPTIONS[k] for k in chosen)})")
    strategy = chosen[0]
    topics: tuple[str, ...] = ()
    pattern = ""
    assigned: tuple[TopicPartition, ...] = ()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise _fail("No topics to subscribe to as specified value for option 'subscribe' "
                        f"is '{opts['subscribe']}'")
    elif strategy == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise _fail("Pattern to subscribe is empty as specified value for option "
                        f"'subscribePattern' is '{opts['subscribepattern']}'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _fail(f"Option 'subscribePattern': invalid regular expression "
                        f"'{pattern}': {exc}") from None
    else:
        assigned = tuple(parse_assign(opts["assign"]))

    kafka, bootstrap = _client_props(opts, _FORBIDDEN_SOURCE_KAFKA, "client")
    group_id = kafka.pop("group.id", None)
    isolation = kafka.pop("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise _fail("Option 'kafka.isolation.level' must be 'read_committed' or "
                    f"'read_uncommitted', got '{isolation}'")

    starting = _offset_spec(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                            "startingoffsets", "latest" if streaming else "earliest")
    ending = _offset_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp",
                          "endingoffsets", "latest")
    no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise _fail("Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                    f"got '{opts['startingoffsetsbytimestampstrategy']}'")
    if strategy == "assign":
        assigned_set = set(assigned)
        for spec, key in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if spec.kind in ("offsets", "timestamps") and set(spec.offsets) != assigned_set:
                raise _fail(f"Option '{key}' (or its ByTimestamp form) must name exactly the "
                            f"partitions of 'assign': {_tp_list(assigned_set)}, got "
                            f"{_tp_list(set(spec.offsets))}")
    elif strategy == "subscribe":
        for spec, key in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            extra = {t for t, _ in spec.offsets} - set(topics)
            if extra:
                raise _fail(f"Option '{key}' (or its ByTimestamp form) names topics that are "
                            f"not subscribed: {', '.join(sorted(extra))}")
    for spec, key in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if spec.kind == "offsets":
            bad = {tp: o for tp, o in spec.offsets.items() if o < EARLIEST}
            if bad:
                raise _fail(f"Option '{key}': offsets must be >= 0, or -2 (earliest) / -1 "
                            f"(latest); got {_tp_list(set(bad))} = {sorted(bad.values())}")

    max_per = parse_int(opts, "maxoffsetspertrigger", 1)
    min_per = parse_int(opts, "minoffsetspertrigger", 1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise _fail(f"The value of minOffsetsPerTrigger({min_per}) is higher than the "
                    f"maxOffsetsPerTrigger({max_per}).")
    delay_raw = opts.get("maxtriggerdelay")
    delay = parse_duration_ms(delay_raw, "maxTriggerDelay") if delay_raw is not None \
        else 15 * 60_000
    if delay_raw is not None and min_per is None:  # inert, as in Spark: warn, don't fail
        log.warning("option 'maxTriggerDelay' has no effect without 'minOffsetsPerTrigger'")
    commit = parse_bool(opts, "commitoffsets", group_id is not None)
    if commit and not group_id:
        raise _fail("Option 'commitOffsets' needs 'kafka.group.id': the group to commit to")

    history = _history_table(opts, strategy, starting)
    if history is not None:
        if "isolation.level" in {k[len("kafka."):] for k in opts if k.startswith("kafka.")} \
                and isolation != "read_committed":
            raise _fail("Option 'historyFromTable' reads the topic read_committed (the table "
                        "holds committed records only): drop 'kafka.isolation.level' or set "
                        "it to 'read_committed'")
        isolation = "read_committed"

    result = SourceOptions(
        bootstrap=bootstrap, strategy=strategy, topics=topics, pattern=pattern,
        assigned=assigned, starting=starting, ending=ending, no_match_strategy=no_match,
        max_offsets_per_trigger=max_per, min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=delay,
        min_partitions=parse_int(opts, "minpartitions", 1),
        max_records_per_partition=parse_int(opts, "maxrecordsperpartition", 1),
        fail_on_data_loss=parse_bool(opts, "failondataloss", True),
        include_headers=parse_bool(opts, "includeheaders", False),
        isolation_level=isolation, group_id=group_id, commit_offsets=commit,
        poll_timeout_ms=parse_int(opts, "kafkaconsumer.polltimeoutms", 1) or 120_000,
        decoder=_decoder(opts),
        kafka=tuple(sorted(kafka.items())),
        history_table=history,
    )
    for key in ("fetchoffset.numretries", "fetchoffset.retryintervalms"):
        parse_int(opts, key, 0)
    if streaming is True:
        check_streaming(result, opts)
    elif streaming is False:
        check_batch(result)
    return result


def _history_table(opts: Mapping[str, str], strategy: str, starting: OffsetSpec
                   ) -> tuple[tuple[str, str], ...] | None:
    """historyFromTable's catalog properties, or None when it is off; it reads whole
    topics from their start, so it takes 'subscribe' and no starting position."""
    if not parse_bool(opts, "historyfromtable", False):
        stray = sorted(k for k in opts if k.startswith("iceberg."))
        if stray:
            raise _fail(f"Option '{stray[0]}' names the Iceberg catalog of "
                        "'historyFromTable', which is not set")
        return None
    if strategy != "subscribe":
        raise _fail("Option 'historyFromTable' reads whole topics: use 'subscribe'")
    if starting.kind != "earliest" and any(
            k in opts for k in ("startingoffsets", "startingtimestamp",
                                "startingoffsetsbytimestamp")):
        raise _fail("Option 'historyFromTable' starts at the table's first record: drop "
                    "the starting* options (or set startingOffsets to earliest)")
    props = {k[len("iceberg."):]: v for k, v in opts.items() if k.startswith("iceberg.")}
    for key in ("uri", "warehouse"):
        if not props.get(key):
            raise _fail(f"Option 'historyFromTable' needs 'iceberg.{key}': the topics' "
                        "Iceberg catalog (`headwater iceberg-spark-conf` prints it)")
    return tuple(sorted(props.items()))


def _tp_list(tps: set[TopicPartition]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"


def check_streaming(o: SourceOptions, opts: Mapping[str, str]) -> None:
    """Options a streaming read refuses (Spark's ``validateStreamOptions``)."""
    opts = {k.lower(): v for k, v in opts.items()}
    for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
        if key in opts:
            raise _fail(f"Option '{SOURCE_OPTIONS[key]}': ending offsets are not valid in "
                        "streaming queries")


def check_batch(o: SourceOptions) -> None:  # noqa: C901
    """Options a batch read refuses (Spark's ``validateBatchOptions``)."""
    if o.starting.kind == "latest":
        raise _fail("Option 'startingOffsets': starting offset can't be latest for batch "
                    "queries")
    if o.starting.kind == "offsets":
        for (t, p), off in sorted(o.starting.offsets.items()):
            if off == LATEST:
                raise _fail(f"Option 'startingOffsets' for {t}-{p} can't be latest (-1) for "
                            "batch queries")
    if o.ending.kind == "earliest":
        raise _fail("Option 'endingOffsets': ending offset can't be earliest for batch "
                    "queries")
    if o.ending.kind == "offsets":
        for (t, p), off in sorted(o.ending.offsets.items()):
            if off == EARLIEST:
                raise _fail(f"Option 'endingOffsets' for {t}-{p} can't be earliest (-2) for "
                            "batch queries")
    s, e = o.starting, o.ending
    if s.kind == e.kind == "offsets":
        for tp, start in s.offsets.items():
            end = e.offsets.get(tp)
            if end is not None and start >= 0 and end >= 0 and start > end:
                raise _fail(f"Options 'startingOffsets'/'endingOffsets': for {tp[0]}-{tp[1]} "
                            f"the starting offset {start} is after the ending offset {end}")
        if o.strategy == "subscribe" and set(s.offsets) != set(e.offsets):
            raise _fail("Options 'startingOffsets' and 'endingOffsets' must name the same "
                        f"partitions: {_tp_list(set(s.offsets))} vs {_tp_list(set(e.offsets))}")
    if s.kind == e.kind == "timestamps":
        for tp, start in s.offsets.items():
            end = e.offsets.get(tp)
            if end is not None and start > end:
                raise _fail("Options 'startingOffsetsByTimestamp'/'endingOffsetsByTimestamp': "
                            f"for {tp[0]}-{tp[1]} the starting timestamp {start} is after the "
                            f"ending timestamp {end}")


@dataclass(frozen=True)
class SinkOptions:
    """The validated sink options."""

    bootstrap: str
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str | None
    checkpoint_location: str | None
    kafka: tuple[tuple[str, str], ...] = ()

    @property
    def client_config(self) -> dict[str, str | int | float | bool]:  # confluent-kafka's config type
        return {**dict(self.kafka), "bootstrap.servers": self.bootstrap}


def parse_sink_options(opts: Mapping[str, str]) -> SinkOptions:
    """Validate sink options (Spark's ``kafkaParamsForProducer`` plus our exactly-once)."""
    opts = {k.lower(): v for k, v in opts.items()}
    _check_unknown(opts, SINK_OPTIONS, "sink")
    kafka, bootstrap = _client_props(opts, _FORBIDDEN_SINK_KAFKA, "producer")
    exactly_once = parse_bool(opts, "exactlyonce", False)
    prefix = opts.get("transactionalidprefix")
    if prefix is not None and not exactly_once:
        raise _fail("Option 'transactionalIdPrefix' only applies with 'exactlyOnce' = 'true'")
    if exactly_once:
        if kafka.get("enable.idempotence", "true").strip().lower() == "false":
            raise _fail("Options 'exactlyOnce' = 'true' and 'kafka.enable.idempotence' = "
                        "'false' contradict each other: transactions need idempotence")
        if kafka.get("acks", "all").strip().lower() not in ("all", "-1"):
            raise _fail("Options 'exactlyOnce' = 'true' and 'kafka.acks' = "
                        f"'{kafka['acks']}' contradict each other: transactions need acks=all")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise _fail("Option 'topic' is empty")
    return SinkOptions(bootstrap=bootstrap, topic=topic.strip() if topic else None,
                       exactly_once=exactly_once, transactional_id_prefix=prefix,
                       checkpoint_location=opts.get("checkpointlocation"),
                       kafka=tuple(sorted(kafka.items())))
