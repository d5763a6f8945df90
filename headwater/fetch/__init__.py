"""Fetch without the wire: incremental fetch sessions (KIP-227, `sessions`) and the
service that reads partitions through the storage seam and parks a fetch that found
too little until an append wakes it (`service`). `api/fetch.py` decodes, authorizes,
calls it and encodes.
"""
