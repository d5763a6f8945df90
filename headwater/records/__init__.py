"""Kafka's record-batch format (magic v2): batch headers, records, compression and
transaction markers, as clients send them and the log stores them. Both engines (the local
log and the shared log) and every API that reads or writes records use it; it knows
nothing of where batches are kept."""
