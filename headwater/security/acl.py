"""ACL bindings as Kafka defines them: resource pattern + access control entry.

A binding says: `principal` from `host` is ALLOWed or DENYed `operation` on resources of
`resource_type` whose name is `resource_name` (LITERAL; "*" is every name) or starts
with it (PREFIXED). Codes are Kafka's wire values (`AclOperation`, `ResourceType`,
`PatternType`, `AclPermissionType`), so requests and metadata records carry them as is.
Filters (DescribeAcls, DeleteAcls) use ANY and MATCH; `validate` gives the message Kafka
gives for a binding it refuses to create.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

# ResourceType
RT_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER",
                  TRANSACTIONAL_ID: "TRANSACTIONAL_ID", DELEGATION_TOKEN: "DELEGATION_TOKEN",
                  USER: "USER"}
# PatternType
PT_ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
# AclOperation
(OP_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT) = range(1, 16)
OPERATIONS = {ALL: "ALL", READ: "READ", WRITE: "WRITE", CREATE: "CREATE", DELETE: "DELETE",
              ALTER: "ALTER", DESCRIBE: "DESCRIBE", CLUSTER_ACTION: "CLUSTER_ACTION",
              DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS", ALTER_CONFIGS: "ALTER_CONFIGS",
              IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE", CREATE_TOKENS: "CREATE_TOKENS",
              DESCRIBE_TOKENS: "DESCRIBE_TOKENS", TWO_PHASE_COMMIT: "TWO_PHASE_COMMIT"}
# AclPermissionType
PERM_ANY, DENY, ALLOW = 1, 2, 3

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

#: Operations each resource type supports (Kafka's `AclEntry.supportedOperations`);
#: the bits DescribeCluster / Metadata / DescribeGroups report as authorized operations.
SUPPORTED = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
              ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE, TWO_PHASE_COMMIT),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter: None and ANY match everything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != RT_ANY and self.resource_type != b.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == OP_ANY or self.operation == b.operation)
                and (self.permission == PERM_ANY or self.permission == b.permission))

    def _matches_pattern(self, b: AclBinding) -> bool:
        name, pt = self.resource_name, self.pattern_type
        if pt == MATCH:  # every binding that would apply to the resource `name`
            if name is None:
                return True
            if b.pattern_type == LITERAL:
                return b.resource_name in (name, WILDCARD)
            return b.pattern_type == PREFIXED and name.startswith(b.resource_name)
        if pt != PT_ANY and pt != b.pattern_type:
            return False
        return name is None or name == b.resource_name

    def invalid(self) -> str | None:
        """Kafka's message for a filter with UNKNOWN parts (`validateFilter`), or None."""
        if self.resource_type not in RESOURCE_TYPES and self.resource_type != RT_ANY \
                or self.pattern_type not in (PT_ANY, MATCH, LITERAL, PREFIXED):
            return "Unknown patternFilter."
        if self.operation not in OPERATIONS and self.operation != OP_ANY \
                or self.permission not in (PERM_ANY, DENY, ALLOW):
            return "Unknown entryFilter."
        return None


def filter_only(b: AclBinding) -> bool:
    """Whether a binding to create carries a value only filters may have (ANY, MATCH):
    Kafka cannot even build such a binding (its constructors throw), so it fails the
    whole CreateAcls request with UNKNOWN_SERVER_ERROR."""
    return (b.resource_type == RT_ANY or b.pattern_type in (PT_ANY, MATCH)
            or b.operation == OP_ANY or b.permission == PERM_ANY)


def validate(b: AclBinding) -> str | None:
    """Kafka's message for a binding it will not create (INVALID_REQUEST), or None:
    its controller's checks (`AclControlManager.validateNewAcl`) and its broker's
    (the CLUSTER resource's only name, a principal with a colon)."""
    if b.resource_type not in RESOURCE_TYPES:
        return "Invalid resourceType " + ("ANY" if b.resource_type == RT_ANY else "UNKNOWN")
    if b.pattern_type not in (LITERAL, PREFIXED):
        return "Invalid patternType " + {PT_ANY: "ANY", MATCH: "MATCH"}.get(
            b.pattern_type, "UNKNOWN")
    if b.operation not in OPERATIONS:
        return "Invalid operation " + ("ANY" if b.operation == OP_ANY else "UNKNOWN")
    if b.permission not in (ALLOW, DENY):
        return "Invalid permissionType " + ("ANY" if b.permission == PERM_ANY else "UNKNOWN")
    if not b.resource_name:
        return "Invalid empty resource name"
    if b.resource_type == CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if ":" not in b.principal:  # as Kafka's SecurityUtils: ":x" and "User:" parse
        return (f"Could not parse principal from `{b.principal}` (no colon is present "
                "separating the principal type from the principal name)")
    return host_problem(b.host)


def host_problem(host: str) -> str | None:
    """Kafka 4.4's host check (KIP-1276): a host is "*", an address, or a CIDR range
    (`10.0.0.0/8`, `fd00::/8`; host bits may be set); Kafka's messages otherwise."""
    if not host:
        return "Host pattern cannot be null or empty"
    if "/" not in host:
        return None
    address, _, prefix = host.partition("/")
    try:
        width = ipaddress.ip_address(address).max_prefixlen
    except ValueError:
        return f"Invalid CIDR notation '{host}': Could not parse [{host}]"
    if not prefix.isdigit():
        return f"Invalid CIDR notation '{host}': Could not parse [{host}]"
    if int(prefix) > width:
        return f"Invalid CIDR notation '{host}': Value [{prefix}] not in range [0,{width}]"
    return None


@functools.lru_cache(maxsize=1024)
def host_network(host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The range of a CIDR ACL host (None for "*" or a single address)."""
    if "/" not in host:
        return None
    try:
        return ipaddress.ip_network(host, strict=False)
    except ValueError:
        return None


def host_matches(pattern: str, host: str) -> bool:
    """Whether an ACL's host covers the client's address."""
    if pattern == WILDCARD or pattern == host:
        return True
    network = host_network(pattern)
    if network is None:
        return False
    try:
        return ipaddress.ip_address(host) in network
    except ValueError:
        return False
