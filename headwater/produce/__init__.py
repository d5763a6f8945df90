"""Produce: the write hot path (`service.py`); the wire handler is `api/produce.py`."""
