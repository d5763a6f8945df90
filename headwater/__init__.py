"""headwater: a Kafka-wire-compatible streaming broker written in Python."""

__version__ = "0.1.0"
