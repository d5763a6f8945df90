"""A Jepsen-style checker of histories recorded by fault campaigns against Kafka-compatible
brokers (history.py: what is recorded; checker.py: what must hold)."""
