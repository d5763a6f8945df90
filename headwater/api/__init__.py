"""Request handlers, one module per API family; `register_all` fills the dispatch table.

Each module's `register` takes the few services its handlers use (its `Services`
protocol, built from `services.py`'s capabilities); `Services` here is all of them,
what the assembly hands over once.
"""

from __future__ import annotations

from typing import Protocol

from ..wire.dispatch import Dispatcher
from . import (
    acls,
    api_versions,
    classic_groups,
    client_quotas,
    cluster_metadata,
    config_resources,
    configs,
    consumer_groups,
    delegation_tokens,
    elections,
    features,
    fetch,
    find_coordinator,
    forwarding,
    group_admin,
    log_dirs,
    modern_groups,
    offset_commits,
    offsets,
    produce,
    producers,
    quorum,
    reassignments,
    sasl,
    share_admin,
    share_fetch,
    share_groups,
    share_state,
    streams_groups,
    topics,
    transactions,
)


class Services(acls.Services, api_versions.Services, classic_groups.Services,
               client_quotas.Services, cluster_metadata.Services, config_resources.Services,
               configs.Services, modern_groups.Services, delegation_tokens.Services,
               elections.Services, features.Services, fetch.Services,
               find_coordinator.Services, forwarding.Services, group_admin.Services,
               log_dirs.Services, offset_commits.Services, offsets.Services,
               produce.Services, producers.Services, quorum.Services,
               reassignments.Services, sasl.Services,
               share_admin.Services, share_fetch.Services,
               share_state.Services, streams_groups.Services, topics.Services,
               transactions.Services, Protocol):
    """Everything the handlers use: what the assembly (`broker.py`) provides (share_groups
    and consumer_groups both take `modern_groups.Services`)."""


#: The API families, each registering its handlers.
HANDLERS = (api_versions, cluster_metadata, topics, configs, produce, fetch, offsets,
            producers, log_dirs, find_coordinator, offset_commits, group_admin,
            classic_groups, consumer_groups, share_groups, streams_groups, transactions,
            share_state,
            share_fetch, share_admin, client_quotas, sasl, acls, quorum, elections,
            reassignments, delegation_tokens, config_resources, features, forwarding)

#: The cross-cutting concerns around the handlers, innermost first: the group APIs'
#: feature gates; a cluster's forwarding of metadata changes to the controller (so a
#: forwarded request is gated where it is handled). Authorization and quotas are not
#: here: each handler asks `access` about its own resources (as Kafka's do), and the
#: server throttles connections (`wire/server.py`). Waiting for a coordinator's records
#: to be committed is not either: each coordinator operation answers once its own are
#: (`CoordinatorRuntime.write_committed`, or `api/committed.py` after a synchronous one).
MIDDLEWARE = (features.middleware, forwarding.middleware)


def register_all(dispatcher: Dispatcher, broker: Services) -> None:
    for module in HANDLERS:
        module.register(dispatcher, broker)
    for make in MIDDLEWARE:
        wrapper = make(broker)
        if wrapper is not None:
            dispatcher.wrap(wrapper)
