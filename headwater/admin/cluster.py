"""`headwater cluster info`: the cluster id, the controller, the brokers (id, host:port,
rack), the finalized features, and how many partitions each broker leads.

Exact requests over the wire client: DescribeCluster v1 (id, controller, brokers),
ApiVersions v3 (finalized features, which confluent-kafka does not expose) and Metadata
v12 of every topic: per broker, how many partitions of the users' topics it leads, and
of `__consumer_offsets`, `__transaction_state` and `__share_group_state`. On a headwater
cluster with shared storage (`headwater.storage=shared`) the leader is the holder of the
partition's lease, and of a coordinator topic's partition the broker running that
coordinator shard; Apache Kafka reports its replicas' leaders the same way (its
coordinators run on them).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .connect import add_arguments
from .tables import render
from .wire_errors import check, open_client, request

COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")
#: The columns of `partitions_led`: the users' topics, then each coordinator topic.
COLUMNS = ("partitions", *COORDINATOR_TOPICS)


def info(args: argparse.Namespace) -> dict[str, Any]:
    client = open_client(args)
    try:
        cluster = request(client, (60, 1, "DescribeCluster"), {
            "include_cluster_authorized_operations": False, "endpoint_type": 1}, args)
        check(int(cluster.error_code), cluster.error_message, args, "cluster",
              "DescribeCluster needs Describe on the cluster")
        versions = request(client, (18, 3, "ApiVersions"), {
            "client_software_name": "headwater-cli", "client_software_version": "1"}, args)
        meta = request(client, (3, 12, "Metadata"), {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, args)
    finally:
        client.close()
    leads = {b.broker_id: dict.fromkeys(COLUMNS, 0) for b in cluster.brokers}
    for t in meta.topics:  # those this principal may describe (as Kafka lists them)
        column = t.name if t.name in COORDINATOR_TOPICS else "partitions"
        for p in t.partitions:
            if int(p.leader_id) >= 0:
                leads.setdefault(int(p.leader_id), dict.fromkeys(COLUMNS, 0))
                leads[int(p.leader_id)][column] += 1
    return {
        "cluster_id": cluster.cluster_id,
        "controller": int(cluster.controller_id),
        "brokers": [{"id": int(b.broker_id), "host": b.host, "port": int(b.port),
                     "rack": b.rack} for b in sorted(cluster.brokers,
                                                     key=lambda b: b.broker_id)],
        "features": [{"name": f.name, "min_level": int(f.min_version_level),
                      "max_level": int(f.max_version_level)}
                     for f in sorted(versions.finalized_features, key=lambda f: f.name)],
        "partitions_led": [{"broker": int(b), **counts}
                           for b, counts in sorted(leads.items())],
    }


def cmd_info(args: argparse.Namespace) -> str:
    found = info(args)
    if args.json:
        return json.dumps(found, indent=2)
    brokers = render(["BROKER", "HOST:PORT", "RACK"],
                     [(b["id"], f"{b['host']}:{b['port']}", b["rack"])
                      for b in found["brokers"]])
    features = render(["FEATURE", "MIN", "MAX"],
                      [(f["name"], f["min_level"], f["max_level"]) for f in found["features"]])
    leads = render(["BROKER", *(c.upper() if c == "partitions" else c for c in COLUMNS)],
                   [[c["broker"], *(c[t] for t in COLUMNS)]
                    for c in found["partitions_led"]])
    return (f"Cluster {found['cluster_id']}\nController {found['controller']}\n\n{brokers}\n\n"
            f"Finalized features\n{features}\n\nPartitions led (Metadata)\n{leads}")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cluster", help="the cluster: id, controller, brokers, features, "
                                       "partitions led")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    c = csub.add_parser("info", help=__doc__.split("\n\n")[0].split(": ", 1)[1].replace(
        "\n", " "), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(c)
    c.add_argument("--json", action="store_true", help="JSON output")
    c.set_defaults(func=cmd_info)
