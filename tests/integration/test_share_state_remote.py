"""share/remote.py's `RemotePersister` against a real broker: every share-state call
the leaders (read, initialize, write) and the share admin (read summary, initialize,
delete) make reaches the share coordinator of another broker in Kafka's share-state
requests (83..87), routed by the share-partition's share key (key type 2), and the
answers come back as the local coordinator's would."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from headwater.share import remote
from headwater.share.coordinator import coordinator_key
from headwater.share.records import StateBatch, StateWrite
from headwater.shared.peers import Peers
from headwater.wire.client_security import ClientSecurity
from headwater.wire.peer_errors import ForwardError
from tests.support.share_state import create_topic
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(120)


class Elsewhere:
    """Every share coordinator is on another broker: the one FindCoordinator at `port`
    names for the share key (that broker itself on one node; any of the three on a
    cluster), as ClusterNode finds it; every group coordinator here."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.routed: list[tuple[str, int, int]] = []
        self.peers = Peers(ClientSecurity())  # a broker's connections to the others

    def remote(self, key: str, key_type: int) -> bool:
        return key_type == 2

    async def ask(self, key: str, key_type: int, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        assert key_type == 2
        self.routed.append((key, key_type, api_key))
        try:
            found = (await self.peers.call("127.0.0.1", self.port, 10, 4, {
                "key_type": key_type, "coordinator_keys": [key]}, 10)).coordinators[0]
            if int(found.error_code):
                return None  # the persister retries, as while a coordinator moves
            return await self.peers.call(found.host, int(found.port), api_key, version,
                                         body, 10)
        except ForwardError:
            return None


class NotHere:
    """No local share coordinator is called: every key is another broker's."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"local {name} called")


def test_share_state_and_admin_calls_reach_a_remote_share_coordinator(broker) -> None:
    client = RawClient("127.0.0.1", broker.port, timeout=30)
    topic_id = create_topic(client, f"remote-state-{uuid.uuid4().hex[:8]}", partitions=2)
    group = f"g:{uuid.uuid4().hex[:6]}"  # a colon in the group id, as Kafka allows
    channel = Elsewhere(broker.port)
    persister = remote.RemotePersister(NotHere(), channel, retry_s=30)

    async def scenario() -> None:
        # A leader's first read: nothing yet; it initializes, then reads with its epoch.
        code, _ = await persister.read(group, topic_id, 0, 0)
        assert code in (0, 42)  # uninitialized: INVALID_REQUEST or an empty state
        assert await persister.initialize(group, topic_id, 0, 0, 10) == 0
        code, snapshot = await persister.read(group, topic_id, 0, 3)
        assert code == 0 and snapshot is not None
        assert (snapshot.state_epoch, snapshot.start_offset) == (0, 10)
        write = StateWrite(0, 3, 12, 1, (StateBatch(12, 14, 2, 1),))
        assert await persister.write(group, topic_id, 0, write, 3) == 0
        code, snapshot = await persister.read(group, topic_id, 0, 3)
        assert code == 0 and snapshot is not None and snapshot.start_offset == 12
        assert snapshot.state_batches == (StateBatch(12, 14, 2, 1),)
        # The admin: describe (summary), reset (initialize at the next epoch), delete.
        summary = await persister.read_summary(group, topic_id, 0)
        assert (summary.error_code, summary.state_epoch, summary.start_offset,
                summary.leader_epoch) == (0, 0, 12, 3)
        assert summary.delivery_complete_count >= 0
        assert await persister.initialize(group, topic_id, 0, summary.state_epoch + 1,
                                          50) == 0
        assert (await persister.read_summary(group, topic_id, 0)).start_offset == 50
        fenced = await persister.write(group, topic_id, 0, write, 3)  # the old epoch
        assert fenced == 124  # FENCED_STATE_EPOCH
        assert (await persister.read_summary(group, topic_id, 1)).start_offset == -1
        assert await persister.delete(group, topic_id, 0) == 0
        after = await persister.read_summary(group, topic_id, 0)
        assert after.error_code != 0 or after.start_offset == -1

    asyncio.run(scenario())
    keys = {key for key, _type, _api in channel.routed}
    assert keys == {coordinator_key(group, topic_id, 0), coordinator_key(group, topic_id, 1)}
    assert {api for _k, _t, api in channel.routed} == {83, 84, 85, 86, 87}
