"""Topic-name rules, Kafka's: legal characters, length, and '.'/'_' collisions."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
#: The coordinators' topics: Metadata marks them internal, and clients may not write them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                             "__share_group_state"})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """A message saying why `name` is not a legal topic name, or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def collision_key(name: str) -> str:
    """Kafka treats names differing only by '.' vs '_' as colliding (metric names)."""
    return name.replace(".", "_")
