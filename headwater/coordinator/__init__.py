"""The runtime shared by every coordinator: shards over internal-topic partitions."""
