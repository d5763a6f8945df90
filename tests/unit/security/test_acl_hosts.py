"""ACL hosts as Kafka 4.4 takes them (KIP-1276): "*", an address, or a CIDR range.
The messages were read off Kafka 4.4.0 (tests/integration/test_acls_vs_kafka.py)."""

from __future__ import annotations

import pytest

from headwater.security.acl import host_matches, host_problem


@pytest.mark.parametrize("host", ["*", "10.1.2.3", "10.0.0.0/8", "10.1.2.3/8", "::1/128",
                                  "fd00::/8", "0.0.0.0/0"])
def test_accepted_hosts(host: str) -> None:
    assert host_problem(host) is None


@pytest.mark.parametrize(("host", "message"), [
    ("", "Host pattern cannot be null or empty"),
    ("10.0.0.0/33", "Invalid CIDR notation '10.0.0.0/33': Value [33] not in range [0,32]"),
    ("::/129", "Invalid CIDR notation '::/129': Value [129] not in range [0,128]"),
    ("not/a/cidr", "Invalid CIDR notation 'not/a/cidr': Could not parse [not/a/cidr]"),
    ("10.0.0.0/x", "Invalid CIDR notation '10.0.0.0/x': Could not parse [10.0.0.0/x]"),
])
def test_refused_hosts(host: str, message: str) -> None:
    assert host_problem(host) == message


@pytest.mark.parametrize(("pattern", "client", "matches"), [
    ("*", "192.168.0.1", True),
    ("127.0.0.1", "127.0.0.1", True),
    ("127.0.0.1", "127.0.0.2", False),
    ("127.0.0.0/8", "127.9.9.9", True),
    ("127.1.2.3/8", "127.0.0.1", True),
    ("10.0.0.0/8", "127.0.0.1", False),
    ("::1/128", "127.0.0.1", False),
    ("::1/128", "::1", True),
    ("10.0.0.0/8", "not-an-address", False),
])
def test_host_matches(pattern: str, client: str, matches: bool) -> None:
    assert host_matches(pattern, client) is matches
