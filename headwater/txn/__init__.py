"""The transaction coordinator: transactional ids, producer epochs, the transaction state
machine over `__transaction_state`, and the COMMIT/ABORT markers it writes.

`state.py` is the transition table, `epoch_bump.py` the EndTxn rules of transaction
version 2 (KIP-890 part 2: an epoch bump at every end), `shard.py` the per-partition logic
(sans-IO), `coordinator.py` the service that runs the shards and writes the markers.
"""
