"""The transaction coordinator: transactional ids, producer epochs, the transaction state
machine over `__transaction_state`, and the COMMIT/ABORT markers it writes.

`state.py` is the transition table, `shard.py` the per-partition logic (sans-IO),
`coordinator.py` the service that runs the shards and writes the markers.
"""
