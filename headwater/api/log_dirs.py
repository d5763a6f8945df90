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


def register(dispatcher: Dispatcher, broker: Services) -> None:
    def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
        if broker.access.denies(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "results": []}
        image = broker.image
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
                plog = broker.partition(name, index)
                if plog is not None:
                    parts.append({"partition_index": index, "partition_size": plog.size_bytes,
                                  "offset_lag": 0, "is_future_key": False})
            topics.append({"name": name, "partitions": parts})
        usage = shutil.disk_usage(broker.data_dir)
        return {"throttle_time": 0, "error_code": 0, "results": [{
            "error_code": 0, "log_dir": str(broker.data_dir), "topics": topics,
            "total_bytes": usage.total, "usable_bytes": usage.free,
            # v5 (Kafka 4.4, KIP-1066): headwater has no cordoned.log.dirs, so its one
            # log dir is never cordoned
            "is_cordoned": False}]}

    dispatcher.register(35, 1, 5, handle)
