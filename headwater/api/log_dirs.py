"""DescribeLogDirs (35): the one data directory and the size of each partition in it."""

from __future__ import annotations

import shutil
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasDataDir, HasImage, HasPartitions


class Services(HasAccess, HasImage, HasPartitions, HasDataDir, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "results": []}
        image = self.broker.image
        if req.topics is None:
            wanted = {name: [p.partition_id for p in t.partitions]
                      for name, t in image.topics_by_name.items()}
        else:
            wanted = {t.topic: list(t.partitions) for t in req.topics
                      if image.topic(t.topic) is not None}
        topics = []
        for name, indexes in wanted.items():
            parts = []
            for index in indexes:
                plog = self.broker.partition(name, index)
                if plog is not None:
                    parts.append({"partition_index": index, "partition_size": plog.size_bytes,
                                  "offset_lag": 0, "is_future_key": False})
            topics.append({"name": name, "partitions": parts})
        usage = shutil.disk_usage(self.broker.data_dir)
        return {"throttle_time": 0, "error_code": 0, "results": [{
            "error_code": 0, "log_dir": str(self.broker.data_dir), "topics": topics,
            "total_bytes": usage.total, "usable_bytes": usage.free,
            # v5 (Kafka 4.4, KIP-1066): headwater has no cordoned.log.dirs, so its one
            # log dir is never cordoned
            "is_cordoned": False}]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(35, 1, 5, handlers.handle)
