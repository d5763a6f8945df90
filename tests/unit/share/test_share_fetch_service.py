"""The share fetch service with fakes of what it uses: sessions and their epochs, the
order of acknowledge / acquire / release, rotation, the long poll and member departure."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence

from kio.schema.errors import ErrorCode as E

from headwater.share.config import AcquireMode
from headwater.share.fetch_service import (
    RENEW,
    FetchRequest,
    Key,
    ShareFetchService,
)
from headwater.share.manager import PartitionFetch, ShareError
from headwater.share.outcomes import AcknowledgementBatch, AcquiredRecords
from headwater.share.sessions import ShareSessionCache

T = uuid.uuid4()
A, B = (T, 0), (T, 1)
ACCEPT = AcknowledgementBatch(0, 0, (1,))


class FakeLeaders:
    """Share-partition leaders with `ready` records per partition; logs every call."""

    def __init__(self) -> None:
        self.ready: dict[Key, int] = {}
        self.calls: list[tuple[object, ...]] = []
        self.config: dict[str, str] = {}
        self.failing: set[Key] = set()
        self.unknown: set[Key] = set()  # topic ids that name no topic
        self.unreadable: set[Key] = set()

    async def fetch(self, key: tuple[str, uuid.UUID, int], member_id: str, max_records: int,
                    max_bytes: int, mode: AcquireMode,
                    batch_size: int | None) -> PartitionFetch:
        part = (key[1], key[2])
        self.calls.append(("fetch", part, max_records))
        if part in self.failing:
            raise ShareError(E.unknown_topic_or_partition)
        if part in self.unreadable:  # the log's storage away (an object store outage)
            raise OSError("Generic S3 error: error sending request")
        count = min(self.ready.pop(part, 0), max_records)
        if not count:
            return PartitionFetch()
        return PartitionFetch(b"x" * count, (AcquiredRecords(0, count - 1, 1),))

    async def acknowledge(self, key: tuple[str, uuid.UUID, int], member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> E:
        self.calls.append(("ack", (key[1], key[2])))
        return E.none

    async def release_member(self, group_id: str, member_id: str,
                             keys: Sequence[Key] | None = None) -> None:
        self.calls.append(("release", member_id, tuple(keys) if keys is not None else None))

    async def wait(self, keys: Sequence[Key], timeout_s: float) -> None:
        self.calls.append(("wait", round(timeout_s, 1)))
        self.ready[keys[0]] = 1  # something arrives while parked

    def refresh_idle(self, group_id: str, keys: Sequence[Key]) -> None:
        self.calls.append(("refresh_idle", group_id, tuple(keys)))

    def unknown_topics(self, keys: Iterable[Key]) -> set[Key]:
        return {k for k in keys if k in self.unknown}

    def lock_duration_ms(self, group_id: str) -> int:
        return 30_000

    def group_config(self, group_id: str) -> dict[str, str]:
        return self.config


class Members:
    def __init__(self, *members: str) -> None:
        self.members = set(members)

    async def is_share_member(self, group_id: str, member_id: str) -> bool:
        return member_id in self.members


def service(*members: str) -> tuple[ShareFetchService, FakeLeaders]:
    leaders = FakeLeaders()
    return ShareFetchService(leaders, ShareSessionCache(2), Members(*members)), leaders


def everyone(keys: Iterable[Key]) -> set[Key]:
    return set()


def req(epoch: int, acks: dict[Key, tuple[AcknowledgementBatch, ...]], **kw: object
        ) -> FetchRequest:
    return FetchRequest("g", "m", epoch, acks, **kw)  # type: ignore[arg-type]


def test_a_session_opens_fetches_and_closes_with_a_release() -> None:
    svc, leaders = service("m")
    leaders.ready = {A: 3}

    async def story() -> None:
        first = await svc.fetch(req(0, {A: (), B: ()}), everyone)
        assert first.error is None and list(first.fetched) == [A]
        assert first.lock_ms == 30_000
        again = await svc.fetch(req(0, {A: ()}), everyone)  # reopened: old one released
        assert again.error is None
        final = await svc.fetch(req(-1, {A: (ACCEPT,)}), everyone)
        assert final.error is None and final.ack_errors == {A: E.none}
        assert svc.sessions.get("g", "m") is None

    asyncio.run(story())
    releases = [c for c in leaders.calls if c[0] == "release"]
    assert releases == [("release", "m", (A, B)), ("release", "m", (A,))]


def test_session_rules_are_top_level_errors() -> None:
    svc, leaders = service("m")

    async def story() -> None:
        opening_acks = await svc.fetch(req(0, {A: (ACCEPT,)}), everyone)
        assert opening_acks.error is not None
        assert opening_acks.error[0] == E.invalid_request
        missing = await svc.fetch(req(3, {A: ()}), everyone)
        assert missing.error is not None
        assert missing.error[0] == E.share_session_not_found
        await svc.fetch(req(0, {A: ()}), everyone)
        stale = await svc.fetch(req(5, {A: ()}), everyone)
        assert stale.error is not None and stale.error[0] == E.invalid_share_session_epoch
        nxt = await svc.fetch(req(1, {A: ()}), everyone)
        assert nxt.error is None  # epoch 1 follows the opening fetch; the next is 2
        changing_final = await svc.fetch(req(-1, {B: ()}), everyone)
        assert changing_final.error is not None
        assert changing_final.error[0] == E.invalid_request
        ack_open = await svc.acknowledge("g", "m", 0, {A: (ACCEPT,)}, False, everyone)
        assert ack_open.error is not None
        assert ack_open.error[0] == E.invalid_share_session_epoch

    asyncio.run(story())


def test_acknowledgements_come_before_acquisition_and_respect_renew_and_acls() -> None:
    svc, leaders = service("m")
    renew = AcknowledgementBatch(0, 0, (RENEW,))

    async def story() -> None:
        await svc.fetch(req(0, {A: (), B: ()}), everyone)
        leaders.calls.clear()
        leaders.config = {"share.renew.acknowledge.enable": "false"}
        out = await svc.fetch(req(1, {A: (ACCEPT,), B: (renew,)}, renew=True),
                              lambda keys: {B} & set(keys))
        assert out.ack_errors == {A: E.none, B: E.topic_authorization_failed}
        assert leaders.calls == [("ack", A)]  # a renewal fetches nothing
        leaders.config = {}
        out = await svc.acknowledge("g", "m", 2, {A: (renew,)}, True, everyone)
        assert out.ack_errors == {A: E.none}
        out = await svc.acknowledge("g", "m", 3, {A: (renew,)}, False, everyone)
        assert out.ack_errors == {A: E.invalid_request}  # RENEW needs the renew flag

    asyncio.run(story())


def test_acquisition_rotates_and_stops_at_max_records() -> None:
    svc, leaders = service("m")

    async def story() -> list[Key]:
        await svc.fetch(req(0, {A: (), B: ()}, max_records=1), everyone)
        firsts = []
        for epoch in (1, 2, 3):
            leaders.ready = {A: 5, B: 5}
            out = await svc.fetch(req(epoch, {}, max_records=2), everyone)
            assert sum(len(f.records) for f in out.fetched.values()) == 2
            firsts.append(next(iter(out.fetched)))
        return firsts

    firsts = asyncio.run(story())
    assert set(firsts) == {A, B}  # the starting partition moves


def test_a_fetch_with_nothing_waits_then_acquires() -> None:
    svc, leaders = service("m")

    async def story() -> None:
        out = await svc.fetch(req(0, {A: ()}, max_wait_s=5.0), everyone)
        assert list(out.fetched) == [A]

    asyncio.run(story())
    assert [c[0] for c in leaders.calls] == ["refresh_idle", "fetch", "wait", "fetch"]
    assert 0 < leaders.calls[2][1] <= 5.0  # type: ignore[operator]


def test_nothing_for_max_bytes_zero_non_members_or_errors() -> None:
    svc, leaders = service("m")
    leaders.ready = {A: 5}
    leaders.failing = {B}

    async def story() -> None:
        out = await svc.fetch(req(0, {A: ()}, max_bytes=0, max_wait_s=5.0), everyone)
        assert out.fetched == {} and out.errors == {}
        outsider, _ = service()
        out = await outsider.fetch(req(0, {A: ()}, max_wait_s=5.0), everyone)
        assert out.fetched == {}
        out = await svc.fetch(req(1, {B: ()}, max_wait_s=5.0), everyone)
        assert list(out.errors) == [B] and list(out.fetched) == [A]

    asyncio.run(story())
    assert not any(c[0] == "wait" for c in leaders.calls)


def test_an_unknown_topic_id_is_answered_whoever_asks() -> None:
    """As Kafka's handler: UNKNOWN_TOPIC_ID for a topic id that names no topic, before
    the membership check (a non-member, or a member the check does not know yet)."""
    for members in (("m",), ()):
        svc, leaders = service(*members)
        leaders.unknown = {B}

        out = asyncio.run(svc.fetch(req(0, {A: (), B: ()}, max_wait_s=0.0), everyone))
        assert {k: e.code for k, e in out.errors.items()} == {B: E.unknown_topic_id}
        assert ("fetch", B, 500) not in leaders.calls


def test_a_member_that_left_is_released_now_or_after_its_grace() -> None:
    svc, leaders = service("m")

    async def story() -> None:
        svc.member_left("g", "gone")  # no session: released at once
        await asyncio.sleep(0)
        await svc.fetch(req(0, {A: ()}), everyone)
        svc.member_left("g", "m")  # has a session: it may still send its final acks
        await asyncio.sleep(0)
        assert svc.sessions.get("g", "m") is not None

    asyncio.run(story())
    assert ("release", "gone", None) in leaders.calls
    assert not any(c[:2] == ("release", "m") for c in leaders.calls)


def test_a_partition_whose_storage_fails_gets_an_error_and_the_others_are_served() -> None:
    """The object store away while a share-partition is loaded: that partition answers
    KAFKA_STORAGE_ERROR (retriable) and the rest of the fetch is served; the request does
    not fail whole (which closed the client's connection)."""
    svc, leaders = service("m")
    leaders.ready = {A: 2}
    leaders.unreadable = {B}

    async def story() -> None:
        out = await svc.fetch(req(0, {A: (), B: ()}), everyone)
        assert out.error is None and list(out.fetched) == [A]
        assert out.errors[B].code == E.kafka_storage_error

    asyncio.run(story())


class WaitingLeaders(FakeLeaders):
    """Each acknowledgement returns only once every asked share-partition's has begun:
    persisted one after another, the first would wait for good."""

    def __init__(self, keys: int) -> None:
        super().__init__()
        self.started: list[Key] = []
        self.all_started = asyncio.Event()
        self.keys = keys

    async def acknowledge(self, key: tuple[str, uuid.UUID, int], member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> E:
        self.started.append((key[1], key[2]))
        if len(self.started) == self.keys:
            self.all_started.set()
        await self.all_started.wait()
        return E.none if key[2] == 0 else E.invalid_record_state


def test_a_requests_acknowledgements_are_persisted_at_once_and_answered_in_order() -> None:
    leaders = WaitingLeaders(keys=2)
    svc = ShareFetchService(leaders, ShareSessionCache(2), Members("m"))

    async def story() -> None:
        await svc.fetch(req(0, {A: (), B: ()}), everyone)
        answer = await asyncio.wait_for(
            svc.fetch(req(1, {B: (ACCEPT,), A: (ACCEPT,)}), everyone), 10)
        assert answer.error is None
        assert list(answer.ack_errors.items()) == [(B, E.invalid_record_state),
                                                   (A, E.none)]

    asyncio.run(story())
    assert sorted(leaders.started) == [A, B]
