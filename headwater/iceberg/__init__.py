"""Topics that are also Apache Iceberg tables (`headwater.iceberg.mode`).

A table writer, a child process of the broker (`launcher.py`) so that Parquet encoding
and catalog commits never take the broker's event loop, reads the partitions its broker
leads as a read_committed client of it (`writer.py`), turns the committed records into
Arrow columns (`columns.py`) and appends them to the topic's table with pyiceberg
(`tables.py`), each table commit recording the next offset of every partition in its
snapshot summary: the table and its offsets move together, so a writer killed
mid-commit, or the next owner of a partition, neither loses nor repeats a record.
See docs/iceberg.md.
"""
