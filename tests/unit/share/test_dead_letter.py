"""The dead-letter writer's pure parts (KIP-1191): the topic rules in Kafka's order and
with its messages, the records and their headers, batching, and what is left to write."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.config import BrokerConfig
from headwater.metadata.image import TOPIC_RESOURCE, TopicImage
from headwater.records.batch import Record, decode_records, iter_batches
from headwater.share.dead_letter import (
    STABLE_ID_BASE,
    DeadLetterConfigError,
    _minus,
    batches,
    dead_letter_records,
    stable_producer_id,
    validate,
)
from headwater.share.outcomes import DeadLetter
from headwater.share.record_state import DeadLetterReason
from headwater.storage.errors import LogError

REJECTED, LIMIT = DeadLetterReason.REJECTED, DeadLetterReason.DELIVERY_LIMIT


class FakeImage:
    def __init__(self, topics: dict[str, dict[str, str]]) -> None:
        self.topics = topics

    def topic(self, name: str) -> TopicImage | None:
        return TopicImage(name, uuid.uuid4()) if name in self.topics else None

    def resource_configs(self, rtype: int, name: str) -> dict[str, str]:
        assert rtype == TOPIC_RESOURCE
        return self.topics.get(name, {})


def broker(topics: dict[str, dict[str, str]] | None = None, **config: str) -> SimpleNamespace:
    return SimpleNamespace(image=FakeImage(topics or {}),
                           config=BrokerConfig({k.replace("_", "."): v
                                                for k, v in config.items()}))


def check(name: str, b: SimpleNamespace) -> str:
    try:
        target = validate("g", {"errors.deadletterqueue.topic.name": name}, b.image, b.config)
    except DeadLetterConfigError as exc:
        return str(exc)
    return f"ok exists={target.exists}"


ENABLED = {"errors.deadletterqueue.group.enable": "true"}


def test_topic_rules_in_kafkas_order_with_its_messages():
    b = broker({"dlq.ok": ENABLED, "dlq.off": {}, "__x": ENABLED})
    assert check("", b) == "Configured DLQ topic name in share group: g is empty."
    assert check("  ", b) == "Configured DLQ topic name in share group: g is empty."
    # `__` first, even for a topic that exists and is enabled
    assert check("__x", b) == ("Configured DLQ topic name in share group: g cannot start "
                               "with __, topic: __x.")
    assert check("dlq.off", b) == ("DLQ is not enabled on configured DLQ topic for share "
                                   "group: g, topic: dlq.off")
    assert check("orders.dead", b) == (
        "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
        "group: g, topic: orders.dead, prefix: dlq.")
    assert check("dlq.missing", b) == (
        "DLQ topic does not exist and auto create is disabled on cluster for share group: "
        "g, topic: dlq.missing.")
    assert check("dlq.ok", b) == "ok exists=True"


def test_prefix_and_auto_create_are_broker_settings():
    b = broker(**{"errors_deadletterqueue_topic_name_prefix": "",
                  "errors_deadletterqueue_auto_create_topics_enable": "true"})
    assert check("anything", b) == "ok exists=False"  # empty prefix: no rule
    b = broker(**{"errors_deadletterqueue_topic_name_prefix": "dead."})
    assert "prefix: dead." in check("dlq.x", b)


def test_records_carry_kafkas_six_headers_and_copy_when_asked():
    source = Record(11, 5, b"k", b"v", [("trace", b"t")])
    got = list(dead_letter_records("g", "orders", 3, [DeadLetter(10, 11, 2, LIMIT)],
                                   {11: source}, 1234))
    assert [o for o, _r in got] == [10, 11]
    key, value, headers, ts = got[0][1]
    assert (key, value, ts) == (None, None, 1234)
    assert headers == [("__dlq.errors.topic", b"orders"), ("__dlq.errors.partition", b"3"),
                       ("__dlq.errors.offset", b"10"), ("__dlq.errors.group", b"g"),
                       ("__dlq.errors.delivery.count", b"2"),
                       ("__dlq.errors.message",
                        b"Offset delivery count exceeded the threshold.")]
    key, value, headers, _ts = got[1][1]
    assert (key, value) == (b"k", b"v")
    assert headers[0] == ("trace", b"t") and headers[3] == ("__dlq.errors.offset", b"11")


@pytest.mark.parametrize("max_bytes", [1, 300, 1 << 20])
def test_batches_stay_within_max_message_bytes_where_a_record_allows(max_bytes: int):
    records = [r for _o, r in dead_letter_records(
        "g", "t", 0, [DeadLetter(0, 19, 1, REJECTED)], {}, 0)]
    out = list(batches(records, max_bytes))
    decoded = [rec for b in out for _pos, _h in iter_batches(b) for rec in decode_records(b)]
    assert [dict(r.headers)["__dlq.errors.offset"] for r in decoded] == [
        str(i).encode() for i in range(20)]
    assert all(len(b) <= max_bytes or len(decode_records(b)) == 1 for b in out)
    assert (len(out) == 1) == (max_bytes == 1 << 20)


def test_minus_leaves_what_is_not_written():
    letters = [DeadLetter(0, 5, 1, REJECTED), DeadLetter(8, 8, 2, LIMIT)]
    assert list(_minus(letters, {0, 3, 8})) == [
        DeadLetter(1, 2, 1, REJECTED), DeadLetter(4, 5, 1, REJECTED)]
    assert list(_minus(letters, set(range(10)))) == []


def _cluster(answers: list[int] | None = None) -> tuple[Any, Any, Any]:
    """A dead-letter topic `dlq.x` whose partition another broker leads: (its image,
    that broker, a writer). The broker appends every Produce, then answers the next of
    `answers` (0 once they run out)."""
    from kio.schema.errors import ErrorCode

    from headwater.metadata.image import PartitionImage
    from headwater.share.dead_letter import DeadLetterWriter

    dlq_id = uuid.uuid4()

    class Image(FakeImage):
        def topic(self, name: str) -> TopicImage | None:
            return TopicImage(name, dlq_id, (PartitionImage(0, 2, 1, (2,), (2,)),)) \
                if name in self.topics else None

    class Elsewhere:
        """The store: the dead-letter partition is not served here."""

        async def ready(self, topic: str, partition: int) -> None:
            return None

        def absent_error(self, topic: str, partition: int) -> int:
            return ErrorCode.not_leader_or_follower

    class Leader:
        """The other broker: Produce appends to its log, Fetch reads it."""

        def __init__(self) -> None:
            self.log: list[bytes] = []
            self.next = 0

        def is_controller(self) -> bool:
            return False

        async def produce(self, topic: str, topic_id: uuid.UUID, partition: int,
                          batch: bytes) -> tuple[int, int]:
            assert (topic, topic_id, partition) == ("dlq.x", dlq_id, 0)
            records = list(decode_records(batch))
            from headwater.records.batch import build_batch
            h = next(iter_batches(batch))[1]
            rebuilt = build_batch([(r.key, r.value, r.headers, 0) for r in records],
                                  base_offset=self.next, producer_id=h.producer_id,
                                  producer_epoch=h.producer_epoch,
                                  base_sequence=h.base_sequence)
            base = self.next
            self.next += len(records)
            self.log.append(rebuilt)
            return ((answers or [0]).pop(0) if answers else 0), base

        async def fetch(self, topic: str, topic_id: uuid.UUID, partition: int, offset: int,
                        max_bytes: int) -> tuple[int, bytes, int, int]:
            data = b"".join(b for b in self.log if next(iter_batches(b))[1].base_offset
                            >= offset) if max_bytes else b""
            return 0, data, self.next, 0

        async def create_topic(self, name: str, partitions: int,
                               configs: dict[str, str]) -> int:
            raise AssertionError("the topic exists")

    image = Image({"dlq.x": ENABLED})
    leader = Leader()
    writer = DeadLetterWriter(BrokerConfig({}), image=lambda: image, store=Elsewhere(),
                              topics=None, clock=lambda: 0, remote=leader)  # type: ignore[arg-type]
    return image, leader, writer


def test_a_dead_letter_partition_another_broker_leads_is_written_there_once():
    """A cluster: the dead-letter partition is led by another broker, so the letters go
    there in a Produce, and after a crash (recovering) the ones it already holds, found
    with a Fetch, are not written again."""
    import asyncio

    from headwater.share.dead_letter import DeadLetterWriter

    image, leader, writer = _cluster()
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    asyncio.run(writer.write(key, "src", letters, config))
    assert leader.next == 2 and writer.counts[("g", "written")] == 2
    # A restart between the write and ARCHIVED: the new writer finds both there.
    again = DeadLetterWriter(BrokerConfig({}), image=lambda: image, store=writer._store,
                             topics=None, clock=lambda: 0, remote=leader)
    asyncio.run(again.write(key, "src", [*letters, DeadLetter(7, 7, 2, LIMIT)], config,
                            recovering=True))
    assert leader.next == 3  # only offset 7 was new
    offsets = [dict(r.headers)["__dlq.errors.offset"] for b in leader.log
               for r in decode_records(b)]
    assert offsets == [b"3", b"4", b"7"]


def test_a_write_whose_outcome_is_unknown_is_retried_without_writing_twice():
    """The leader appended the letters but its answer says "timed out, possibly
    persisted" (a commit cut off by a fault): the records are not archived without
    their dead letters (the chaos campaign found two so lost); the write raises, and
    the caller's next try reads back what landed and writes only the rest."""
    import asyncio

    from kio.schema.errors import ErrorCode

    from headwater.storage.errors import LogError

    _image, leader, writer = _cluster([ErrorCode.request_timed_out])
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    with pytest.raises(LogError):
        asyncio.run(writer.write(key, "src", letters, config))
    assert writer.counts[("g", "failed")] == 0
    asyncio.run(writer.write(key, "src", letters, config))
    offsets = [dict(r.headers)["__dlq.errors.offset"] for b in leader.log
               for r in decode_records(b)]
    assert offsets == [b"3", b"4"]


def test_a_topic_that_refuses_the_letters_for_good_archives_them_without():
    import asyncio

    from kio.schema.errors import ErrorCode

    _image, leader, writer = _cluster([ErrorCode.policy_violation])
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    asyncio.run(writer.write(("g", uuid.uuid4(), 0), "src",
                             [DeadLetter(3, 4, 1, REJECTED)], config))
    assert writer.counts[("g", "failed")] == 2


def test_a_read_back_cut_off_is_tried_again_before_anything_is_written():
    """A new leader finds records ARCHIVING (a crash came before ARCHIVED) and reads back
    what the dead-letter partition holds; the broker leading it is unreachable for that
    read (not a Kafka error: the connection failed). The next try must read back again,
    not write every letter: the campaign found a letter written twice so."""
    import asyncio

    from headwater.share.dead_letter import DeadLetterWriter

    image, leader, writer = _cluster()
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    asyncio.run(writer.write(key, "src", letters, config))
    assert leader.next == 2
    again = DeadLetterWriter(BrokerConfig({}), image=lambda: image, store=writer._store,
                             topics=None, clock=lambda: 0, remote=leader)
    fetch = leader.fetch

    async def unreachable(*_args: Any) -> Any:
        raise ConnectionResetError("broker 127.0.0.1:9 unreachable")
    leader.fetch = unreachable
    with pytest.raises(ConnectionResetError):
        asyncio.run(again.write(key, "src", letters, config, recovering=True))
    leader.fetch = fetch
    asyncio.run(again.write(key, "src", letters, config))  # the retry: not "recovering"
    assert leader.next == 2  # nothing written twice


def test_an_append_cut_off_is_read_back_before_it_is_tried_again():
    """The Produce to the leader of the dead-letter partition fails without an answer
    (its connection reset after the leader appended): the outcome is unknown, so the
    next try reads back first."""
    import asyncio

    _image, leader, writer = _cluster()
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    produce = leader.produce

    async def appended_then_lost(*args: Any) -> tuple[int, int]:
        await produce(*args)
        raise ConnectionResetError("connection reset by peer")
    leader.produce = appended_then_lost
    with pytest.raises(ConnectionResetError):
        asyncio.run(writer.write(key, "src", letters, config))
    leader.produce = produce
    asyncio.run(writer.write(key, "src", letters, config))
    assert leader.next == 2


def test_a_write_delivered_late_after_its_retry_lands_once():
    """The Produce carrying the letters is held in the network (a partition that later
    heals delivers it: Toxiproxy's blackhole does the same) and the writer gives up on
    it. Reading back cannot see it, so its retry would write the letters again and the
    late copy land beside them: the 30-minute campaign found 36 letters so written
    twice. With a producer id the retry sends the same batches, and the leader answers
    whichever copy comes second as a duplicate, as for any idempotent producer."""
    import asyncio

    from headwater.share.dead_letter import DeadLetterWriter

    image, leader, _writer = _cluster()
    seen: dict[tuple[int, int, int], int] = {}
    held: list[bytes] = []
    sent: list[Any] = []
    append = leader.produce

    async def idempotent(topic: str, topic_id: uuid.UUID, partition: int,
                         batch: bytes) -> tuple[int, int]:
        h = next(iter_batches(batch))[1]
        sent.append(h)
        if not held and not seen:
            held.append(batch)  # the first request: delayed, its answer never comes
            raise ConnectionResetError("broker 127.0.0.1:9 unreachable")
        sequence = (h.producer_id, h.base_sequence, h.last_sequence)
        if h.producer_id >= 0 and sequence in seen:
            return 0, seen[sequence]  # a duplicate: answered as written, not appended
        code, base = await append(topic, topic_id, partition, batch)
        seen[sequence] = base
        return code, base
    leader.produce = idempotent

    class Ids:
        def allocate_producer_id(self) -> int:
            return 4711

    writer = DeadLetterWriter(BrokerConfig({}), image=lambda: image, store=_writer._store,
                              topics=None, clock=lambda: 0, remote=leader,
                              producer_ids=Ids())
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    with pytest.raises(ConnectionResetError):
        asyncio.run(writer.write(key, "src", letters, config))
    asyncio.run(writer.write(key, "src", letters, config))  # the retry
    [late] = held
    asyncio.run(leader.produce("dlq.x", leader_topic_id(image), 0, late))  # delivered now
    offsets = [dict(r.headers)["__dlq.errors.offset"] for b in leader.log
               for r in decode_records(b)]
    assert offsets == [b"3", b"4"]
    assert writer.counts[("g", "written")] == 2
    # the next letters follow on in sequence
    asyncio.run(writer.write(key, "src", [DeadLetter(9, 9, 1, REJECTED)], config))
    assert (sent[-1].producer_id, sent[-1].base_sequence) == (stable_producer_id(key), 2)


def leader_topic_id(image: Any) -> uuid.UUID:
    topic = image.topic("dlq.x")
    assert topic is not None
    return topic.topic_id


def _idempotent(leader: Any, delay_s: float = 0.0, drop_first: bool = False) -> list[Any]:
    """The leader answers a batch whose sequences it has seen as a duplicate (not
    appended), as for any idempotent producer; with `drop_first` the first Produce
    lands but its answer is lost (a connection reset). The headers of every batch
    sent, in order."""
    import asyncio

    seen: dict[tuple[int, int, int], int] = {}
    sent: list[Any] = []
    append = leader.produce

    async def produce(topic: str, topic_id: uuid.UUID, partition: int,
                      batch: bytes) -> tuple[int, int]:
        h = next(iter_batches(batch))[1]
        sent.append(h)
        await asyncio.sleep(delay_s)
        sequence = (h.producer_id, h.base_sequence, h.last_sequence)
        if h.producer_id >= 0 and sequence in seen:
            return 0, seen[sequence]
        code, base = await append(topic, topic_id, partition, batch)
        seen[sequence] = base
        if drop_first and len(sent) == 1:
            raise ConnectionResetError("the answer was lost")
        return int(code), base
    leader.produce = produce
    return sent


def _written_offsets(leader: Any) -> list[bytes]:
    return [dict(r.headers)["__dlq.errors.offset"] for b in leader.log
            for r in decode_records(b)]


def _idempotent_writer(image: Any, leader: Any, store: Any, allocated: int = 4711) -> Any:
    """A writer whose controller hands out `allocated` (another process: another id)."""
    from headwater.share.dead_letter import DeadLetterWriter

    class Ids:
        def allocate_producer_id(self) -> int:
            return allocated

    return DeadLetterWriter(BrokerConfig({}), image=lambda: image, store=store,
                            topics=None, clock=lambda: 0, remote=leader, producer_ids=Ids())


def test_two_copies_of_a_leader_writing_at_once_write_each_letter_once():
    """A share-partition's leader is loaded again while its previous copy is still
    writing dead letters (its lease moved and came back, its state write was fenced):
    both hand the writer the same ARCHIVING records at once. A campaign found letters
    written two and three times so (sequences 38 and 41, the same three letters)."""
    import asyncio

    image, leader, plain = _cluster()
    _idempotent(leader, delay_s=0.05)
    writer = _idempotent_writer(image, leader, plain._store)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 5, 1, REJECTED)]

    async def both() -> None:
        await asyncio.gather(writer.write(key, "src", letters, config),
                             writer.write(key, "src", letters, config, recovering=True))
    asyncio.run(both())
    assert _written_offsets(leader) == [b"3", b"4", b"5"]


def test_a_reloaded_leader_reads_back_even_when_it_resends_a_lost_write():
    """Letters 3-4 are written and finished by one copy of the leader; a reloaded copy
    read the state before that finish and finds them ARCHIVING with 7, whose write's
    answer was lost (kept to be sent again). Sending 7 again must not stand in for the
    read-back: 3-4 are in the log already."""
    import asyncio

    image, leader, plain = _cluster()
    writer = _idempotent_writer(image, leader, plain._store)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    asyncio.run(writer.write(key, "src", [DeadLetter(3, 4, 1, REJECTED)], config))
    writer.finished(key, [DeadLetter(3, 4, 1, REJECTED)])
    lost = _idempotent(leader, drop_first=True)
    with pytest.raises(ConnectionResetError):
        asyncio.run(writer.write(key, "src", [DeadLetter(7, 7, 1, REJECTED)], config))
    asyncio.run(writer.write(key, "src", [DeadLetter(3, 4, 1, REJECTED),
                                          DeadLetter(7, 7, 1, REJECTED)], config,
                             recovering=True))
    assert _written_offsets(leader) == [b"3", b"4", b"7"]
    assert [h.base_sequence for h in lost] == [2, 2]  # the lost write, sent again


def _sequenced(leader: Any) -> list[bytes]:
    """The leader checks sequences as a partition leader does: a batch repeating one it
    holds is a duplicate (answered, not appended), one that does not follow its
    producer's last is OUT_OF_ORDER_SEQUENCE. The batches held back, for delivering
    late: every batch while the list holds None first."""
    from kio.schema.errors import ErrorCode

    last: dict[int, int] = {}
    seen: dict[tuple[int, int, int], int] = {}
    held: list[bytes] = []
    append = leader.produce

    async def produce(topic: str, topic_id: uuid.UUID, partition: int,
                      batch: bytes) -> tuple[int, int]:
        if held and held[0] is None:
            held.append(batch)
            raise ConnectionResetError("held in the network")
        h = next(iter_batches(batch))[1]
        sequence = (h.producer_id, h.base_sequence, h.last_sequence)
        if sequence in seen:
            return 0, seen[sequence]
        if h.producer_id in last and h.base_sequence != last[h.producer_id] + 1:
            return int(ErrorCode.out_of_order_sequence_number), -1
        code, base = await append(topic, topic_id, partition, batch)
        seen[sequence] = base
        last[h.producer_id] = h.last_sequence
        return int(code), base
    leader.produce = produce
    return held


def test_a_previous_process_write_delivered_after_its_successor_read_back_lands_once():
    """A share-partition's leader moves to another broker while its Produce of letters
    3-4 is held in the network; the new leader reads back (nothing there yet) and
    writes them, then the old request arrives. Each process once took a producer id of
    its own, so both copies landed (a 2,000-second campaign: producer ids 13002 and
    11002). The share-partition's id is the same in both: the late copy repeats the
    successor's sequences and is answered as a duplicate."""
    import asyncio

    image, leader, plain = _cluster()
    held = _sequenced(leader)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    old = _idempotent_writer(image, leader, plain._store)
    held.append(None)  # type: ignore[arg-type]
    with pytest.raises(ConnectionResetError):
        asyncio.run(old.write(key, "src", letters, config))
    held.pop(0)
    new = _idempotent_writer(image, leader, plain._store, allocated=4712)
    asyncio.run(new.write(key, "src", letters, config, recovering=True))
    [late] = held
    asyncio.run(leader.produce("dlq.x", leader_topic_id(image), 0, late))
    assert _written_offsets(leader) == [b"3", b"4"]


def test_a_previous_process_write_landing_first_is_found_and_not_repeated():
    """The other order: the old process's letters 3-4 land after the successor read
    back but before its write of 3-5. The successor's batch breaks the sequence
    (OUT_OF_ORDER_SEQUENCE), its next try reads back, finds 3-4 and writes only 5."""
    import asyncio

    image, leader, plain = _cluster()
    held = _sequenced(leader)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    old = _idempotent_writer(image, leader, plain._store)
    held.append(None)  # type: ignore[arg-type]
    with pytest.raises(ConnectionResetError):
        asyncio.run(old.write(key, "src", [DeadLetter(3, 4, 1, REJECTED)], config))
    held.pop(0)
    [late] = held
    new = _idempotent_writer(image, leader, plain._store, allocated=4712)
    produce = leader.produce

    async def late_lands_first(*args: Any) -> tuple[int, int]:
        leader.produce = produce
        await produce("dlq.x", leader_topic_id(image), 0, late)
        return await produce(*args)  # type: ignore[no-any-return]
    leader.produce = late_lands_first
    letters = [DeadLetter(3, 5, 1, REJECTED)]
    with pytest.raises(LogError):
        asyncio.run(new.write(key, "src", letters, config, recovering=True))
    asyncio.run(new.write(key, "src", letters, config, recovering=True))
    assert _written_offsets(leader) == [b"3", b"4", b"5"]


def test_the_stable_id_is_given_up_when_the_leader_keeps_refusing_its_sequence():
    """The leader holds sequences of the id that its log no longer shows (retention
    removed every batch): the read-back learns 0 and the leader refuses it each time;
    the third refusal gives the share-partition an allocated id."""
    import asyncio

    from kio.schema.errors import ErrorCode

    image, leader, plain = _cluster()
    append = leader.produce

    async def remembers(topic: str, topic_id: uuid.UUID, partition: int,
                        batch: bytes) -> tuple[int, int]:
        h = next(iter_batches(batch))[1]
        if h.producer_id >= STABLE_ID_BASE:
            return int(ErrorCode.out_of_order_sequence_number), -1
        return await append(topic, topic_id, partition, batch)  # type: ignore[no-any-return]
    leader.produce = remembers
    writer = _idempotent_writer(image, leader, plain._store)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 3, 1, REJECTED)]
    for _ in range(3):
        with pytest.raises(LogError):
            asyncio.run(writer.write(key, "src", letters, config))
    asyncio.run(writer.write(key, "src", letters, config))
    assert _written_offsets(leader) == [b"3"]
    assert next(iter_batches(leader.log[0]))[1].producer_id == 4711


def test_stable_ids_lie_above_the_controllers_and_differ_per_share_partition():
    topic_id = uuid.UUID(int=7)
    ids = {stable_producer_id(("g", topic_id, p)) for p in range(1000)}
    assert len(ids) == 1000
    assert all(STABLE_ID_BASE <= i < 2 * STABLE_ID_BASE for i in ids)
    assert stable_producer_id(("g", topic_id, 1)) == stable_producer_id(("g", topic_id, 1))


def test_letters_answered_as_a_duplicate_of_other_letters_are_written_again():
    """Two processes of a share-partition build different batches under the same
    sequences (the second's read-back ran before the first's batch landed, and the
    letters they hold differ): the leader answers the second as a duplicate of the
    first, and its letters would never be written (a 2,000-second campaign lost one so).
    The writer reads what the answer points at, finds other letters, and writes its own
    after them."""
    import asyncio

    image, leader, plain = _cluster()
    _sequenced(leader)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    first = _idempotent_writer(image, leader, plain._store)
    second = _idempotent_writer(image, leader, plain._store, allocated=4712)
    asyncio.run(first.write(key, "src", [DeadLetter(1, 1, 1, REJECTED)], config))
    asyncio.run(second.write(key, "src", [DeadLetter(1, 1, 1, REJECTED)], config,
                             recovering=True))  # found written; sequence 1 learnt
    # the first writes on at sequence 1 before the second does
    asyncio.run(first.write(key, "src", [DeadLetter(3, 4, 1, REJECTED)], config))
    with pytest.raises(LogError):  # same sequences (1-2), other letters: a duplicate
        asyncio.run(second.write(key, "src", [DeadLetter(5, 6, 1, REJECTED)], config))
    asyncio.run(second.write(key, "src", [DeadLetter(5, 6, 1, REJECTED)], config))
    assert _written_offsets(leader) == [b"1", b"3", b"4", b"5", b"6"]


def test_a_read_cut_off_after_an_answered_append_does_not_write_the_letters_again():
    """The leader of the dead-letter partition appends the letters and answers; the read
    that checks what the answer points at (`_check_landed`) is cut off (its broker
    killed: a connection reset, not a Kafka error). The letters are in the log, their
    sequences used: the next try must find them there, not write them again under the
    next sequences (a 2,000-second campaign found three letters written twice so)."""
    import asyncio

    image, leader, plain = _cluster()
    _sequenced(leader)
    writer = _idempotent_writer(image, leader, plain._store)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(3, 4, 1, REJECTED)]
    asyncio.run(writer.write(key, "src", [DeadLetter(1, 1, 1, REJECTED)], config))
    fetch = leader.fetch
    reads: list[int] = []

    async def cut_after_append(topic: str, topic_id: uuid.UUID, partition: int,
                               offset: int, max_bytes: int) -> Any:
        reads.append(offset)
        raise ConnectionResetError("broker 127.0.0.1:9 killed")
    leader.fetch = cut_after_append
    with pytest.raises(ConnectionResetError):
        asyncio.run(writer.write(key, "src", letters, config))
    assert reads and _written_offsets(leader) == [b"1", b"3", b"4"]  # appended, then cut
    leader.fetch = fetch
    asyncio.run(writer.write(key, "src", letters, config))  # the retry
    assert _written_offsets(leader) == [b"1", b"3", b"4"]


def test_a_stale_copy_of_the_leader_does_not_write_letters_its_successor_finished():
    """Campaign c28: a letter's append was not committed (kept to be sent again); the
    share coordinator had the leader loaded again under the new leader epoch, and that
    copy sent the kept batch, wrote nothing more, persisted ARCHIVED and `finished` the
    letter; then the copy it replaced, still holding the record ARCHIVING, wrote it again
    under the next sequence (its own ARCHIVED write fenced only after). The stale copy's
    write is refused now, and nothing is written twice."""
    import asyncio

    from headwater.share.dead_letter import StaleLeaderError

    image, leader, plain = _cluster()
    _idempotent(leader)
    writer = _idempotent_writer(image, leader, plain._store)
    key = ("g", uuid.uuid4(), 0)
    config = {"errors.deadletterqueue.topic.name": "dlq.x"}
    letters = [DeadLetter(52891, 52891, 1, REJECTED)]
    asyncio.run(writer.write(key, "src", letters, config, recovering=True, leader_epoch=106))
    writer.finished(key, letters)
    with pytest.raises(StaleLeaderError):
        asyncio.run(writer.write(key, "src", letters, config, leader_epoch=104))
    assert _written_offsets(leader) == [b"52891"]
    # the successor itself, and any later leadership, still writes
    asyncio.run(writer.write(key, "src", [DeadLetter(7, 7, 1, REJECTED)], config,
                             leader_epoch=106))
    asyncio.run(writer.write(key, "src", [DeadLetter(8, 8, 1, REJECTED)], config,
                             leader_epoch=107))
    assert _written_offsets(leader) == [b"52891", b"7", b"8"]
