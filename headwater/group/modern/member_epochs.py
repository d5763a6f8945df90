"""What every group of epoch-carrying members (consumer, share, streams) checks the same
way: an OffsetFetch's member epoch, OffsetDelete and DeleteGroups, and which member a
session or rebalance timer may still fence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode as E


class HasMemberEpoch(Protocol):
    @property
    def member_epoch(self) -> int: ...


_M = TypeVar("_M", bound=HasMemberEpoch)


class MemberEpochChecks:
    """`base.Group`'s fetch and delete validations over `members` (id -> member)."""

    members: Mapping[str, HasMemberEpoch]

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        if not member_id and member_epoch < 0:
            return E.none  # an admin fetch
        member = self.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        if member_epoch != member.member_epoch:
            return E.stale_member_epoch
        return E.none

    def validate_offset_delete(self) -> int:
        return E.none

    def validate_delete(self) -> int:
        return E.non_empty_group if self.members else E.none


def fenceable(members: Mapping[str, _M] | None, member_id: str,
              expected_epoch: int | None) -> _M | None:
    """The member a timer may fence: still in the group (`members`, None for a group
    gone) and, for a rebalance timeout armed at `expected_epoch`, still at that epoch."""
    member = members.get(member_id) if members is not None else None
    if member is None or expected_epoch is not None and member.member_epoch != expected_epoch:
        return None
    return member
