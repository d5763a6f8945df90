"""Operator tools that talk to a running broker over the Kafka protocol."""
