"""The orphan-object cleaner: objects of the shared log that no batch can ever read.

A commit PUTs its window's object under a fresh key, then one transaction inserts the
`objects` row with the batch rows that point into it (`sequencer.commit`). Two kinds of
object are therefore garbage, and deleting them never makes a hole:

* **An object without a row**: its commit failed (or its broker died between the PUT
  and the commit). But a young one may be a commit still in flight, so only objects
  older than `older_than_s` (by the object store's last-modified time) go: the limit
  must exceed the longest a commit can take after its PUT, plus the clock skew between
  the broker and the store (minutes, not seconds).
* **A row that no batch references**: its partition was deleted (`SharedStore._forget`
  removes the batch rows, not the objects), or every partition of its window was fenced.
  Such a row stays unreferenced: a commit only references the key it inserts in the
  same transaction, and keys are never reused, so no later commit can point at it. The
  DELETE locks the rows it removes all the same (and the foreign key from `batches`
  would refuse the delete of a referenced row). The row goes first, the object after
  the transaction: if that delete fails, the object is an orphan of the first kind,
  deleted by a later pass.

Merging and compaction (`upkeep.py`) replace a partition's rows by rows into a new
`seg/` object, inserted with its `objects` row in the same transaction: the objects the
old rows pointed into become the second kind once no partition's rows are left in them.
"""

from __future__ import annotations

import time

import asyncpg
from obstore.exceptions import NotFoundError

from .objects import DATA_PREFIXES, ObjectStore
from .schema import Connection


async def delete_orphans(pool_or_conn: asyncpg.Pool | Connection, objects: ObjectStore,
                         *, older_than_s: float) -> int:
    """Delete the objects no batch can read (see the module); how many were deleted."""
    if isinstance(pool_or_conn, asyncpg.Pool):
        async with pool_or_conn.acquire() as conn:
            return await _clean(conn, objects, older_than_s)
    return await _clean(pool_or_conn, objects, older_than_s)


async def _clean(conn: Connection, objects: ObjectStore, older_than_s: float) -> int:
    async with conn.transaction():
        unreferenced = [r["key"] for r in await conn.fetch(
            "DELETE FROM objects AS o WHERE NOT EXISTS "
            "(SELECT 1 FROM batches AS b WHERE b.object_key = o.key) RETURNING o.key")]
    cutoff = time.time() - older_than_s
    old = [key for prefix in DATA_PREFIXES for key, modified in await objects.listing(prefix)
           if modified.timestamp() < cutoff]
    committed = {r["key"] for r in await conn.fetch(
        "SELECT key FROM objects WHERE key = ANY($1::text[])", old)} if old else set()
    committed.update(unreferenced)  # their rows are gone: deleted once, below
    deleted = 0
    for key in [*unreferenced, *(k for k in old if k not in committed)]:
        try:
            await objects.delete(key)
        except NotFoundError:
            continue
        deleted += 1
    return deleted
