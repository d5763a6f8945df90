"""The group coordinator: offsets, classic groups and KIP-848 consumer groups."""
