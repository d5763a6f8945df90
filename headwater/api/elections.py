"""ElectLeaders (43): `kafka-leader-election`, preferred and unclean.

Every partition has one replica, this node, which is its leader and its whole ISR, so
no election ever changes anything: a named partition answers ELECTION_NOT_NEEDED (the
tool prints "Valid replica already elected"), and an election over all partitions
(`topic_partitions` null) answers with no partitions, because Kafka's controller leaves
out the partitions whose leader is already the one wanted. Unknown topics and partitions
get Kafka's UNKNOWN_TOPIC_OR_PARTITION messages.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasImage

ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


class Services(HasAccess, HasImage, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if req.topic_partitions is None:
            return {"throttle_time": 0, "error_code": 0, "replica_election_results": []}
        denied = self.broker.access.denies(ctx, A.ALTER, A.CLUSTER, A.CLUSTER_NAME)
        image = self.broker.image
        results = []
        for entry in req.topic_partitions:
            topic = image.topic(entry.topic)
            indexes = {p.partition_id for p in topic.partitions} if topic else set()
            out = []
            for index in entry.partitions:
                if denied:
                    code, message = E.cluster_authorization_failed, None
                elif topic is None:
                    code, message = (E.unknown_topic_or_partition,
                                     f"No such topic as {entry.topic}")
                elif index not in indexes:
                    code, message = (E.unknown_topic_or_partition,
                                     f"No such partition as {entry.topic}-{index}")
                else:
                    code, message = E.election_not_needed, ELECTION_NOT_NEEDED_MESSAGE
                out.append({"partition_id": index, "error_code": code,
                            "error_message": message})
            results.append({"topic": entry.topic, "partition_result": out})
        return {"throttle_time": 0,
                "error_code": E.cluster_authorization_failed if denied else 0,
                "replica_election_results": results}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(43, 0, 2, handlers.handle)
