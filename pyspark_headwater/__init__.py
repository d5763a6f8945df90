"""PySpark connector for headwater (and any Kafka-wire broker): ``format("headwater")``.

A pure-Python data source on PySpark's Python Data Source API (pyspark >= 4.2). Spark
registers it by itself: any installed top-level module named ``pyspark_*`` that exposes
``DefaultSource`` is looked up when a session first resolves a Python data source. The
schema, options and offset JSON are those of Spark's built-in Kafka connector.
"""

from .datasource import DefaultSource
from .options import HeadwaterOptionError
from .verdicts import verdicts

__all__ = ["DefaultSource", "HeadwaterOptionError", "register", "verdicts"]


def register(spark: object) -> None:
    """Register explicitly (only needed when the package is not installed but importable,
    e.g. via PYTHONPATH)."""
    spark.dataSource.register(DefaultSource)  # type: ignore[attr-defined]
