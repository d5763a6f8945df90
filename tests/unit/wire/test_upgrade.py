"""Requests of older versions read as the newest version's kio class (codec.upgrade)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest as AddOffsets3
from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest as AddOffsets4
from kio.schema.join_group.v0.request import JoinGroupRequest as Join0
from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as Protocol0
from kio.schema.join_group.v9.request import JoinGroupRequest as Join9
from kio.schema.leave_group.v0.request import LeaveGroupRequest as Leave0
from kio.schema.leave_group.v5.request import LeaveGroupRequest as Leave5
from kio.schema.share_fetch.v1.request import ShareFetchRequest as ShareFetch1
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetch2

from headwater.api.classic_groups import _one_member
from headwater.wire.codec import upgrade
from headwater.wire.dispatch import RequestContext, typed

MS = datetime.timedelta(milliseconds=1)


def join0() -> Join0:
    return Join0(group_id="g", session_timeout=10_000 * MS, member_id="",
                 protocol_type="consumer",
                 protocols=(Protocol0(name="range", metadata=b"\x00"),))


def test_fields_an_old_version_lacks_take_the_schema_defaults() -> None:
    new = upgrade(Join9, join0())
    assert isinstance(new, Join9)
    assert new.rebalance_timeout == -1 * MS  # JoinGroup v0: none, the schema says -1
    assert new.group_instance_id is None and new.reason is None
    assert [(p.name, bytes(p.metadata)) for p in new.protocols] == [("range", b"\x00")]
    assert new.session_timeout == 10_000 * MS


def test_entities_whose_shape_did_not_change_are_kept_as_they_are() -> None:
    """JoinGroup's protocols have the same fields in v0 and v9: the request's own objects
    are kept (read as v9's, not rebuilt on every request); a request whose every field
    is the newest's is handed over as it is."""
    old = join0()
    new = upgrade(Join9, old)
    assert new.protocols is old.protocols
    v1 = ShareFetch1(group_id="g", member_id="m", share_session_epoch=0, max_wait=MS,
                     min_bytes=1, max_bytes=1, max_records=1, batch_size=1, topics=(),
                     forgotten_topics_data=())
    v2 = upgrade(ShareFetch2, v1)  # v2 adds the acquire mode and renewing acknowledgements
    assert isinstance(v2, ShareFetch2) and v2.share_acquire_mode == 0 and not v2.is_renew_ack
    same = AddOffsets3(transactional_id="t", producer_id=1, producer_epoch=0, group_id="g")
    assert upgrade(AddOffsets4, same) is same  # v4 changed no field


def test_the_newest_version_is_handed_over_as_it_is() -> None:
    new = upgrade(Join9, join0())
    assert upgrade(Join9, new) is new


def test_a_field_whose_meaning_moved_is_set_by_the_changes() -> None:
    seen: list[Leave5] = []

    def handler(ctx: RequestContext, req: Leave5) -> Any:
        seen.append(req)
        return None

    handle = typed(Leave5, handler, _one_member)
    ctx = RequestContext(13, 0, 1, "c", "127.0.0.1", 1)
    handle(ctx, Leave0(group_id="g", member_id="m-1"))
    (req,) = seen
    assert [(m.member_id, m.group_instance_id) for m in req.members] == [("m-1", None)]
    handle(ctx, req)  # a v5 request keeps its own members
    assert seen[1] is req
