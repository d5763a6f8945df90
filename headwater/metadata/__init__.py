"""Cluster metadata kept as records in `__cluster_metadata`, applied to an immutable image."""
