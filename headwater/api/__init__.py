"""Request handlers, one module per API family; `register_all` fills the dispatch table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire.dispatch import Dispatcher

if TYPE_CHECKING:
    from ..broker import Broker


def register_all(dispatcher: Dispatcher, broker: Broker) -> None:
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
        offset_commits,
        offsets,
        produce,
        producers,
        quorum,
        reassignments,
        sasl,
        settle,
        share_admin,
        share_fetch,
        share_groups,
        share_state,
        topics,
        transactions,
    )

    for module in (api_versions, cluster_metadata, topics, configs, produce, fetch,
                   offsets, producers, log_dirs, find_coordinator, offset_commits,
                   group_admin, classic_groups, consumer_groups, share_groups, transactions,
                   share_state, share_fetch, share_admin, client_quotas, sasl, acls, quorum,
                   elections, reassignments, delegation_tokens, config_resources, features):
        module.register(dispatcher, broker)
    features.gate_group_apis(dispatcher, broker)
    forwarding.register(dispatcher, broker)  # it wraps handlers registered above
    settle.register(dispatcher, broker)  # around those, forwarded ones included
