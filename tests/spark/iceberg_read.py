"""Read a topic's Iceberg table with Spark SQL, as a user does: Iceberg's own Spark
runtime and JDBC catalog on the pyspark 4.1 of `make iceberg-spark` (run with
PYTHONPATH=.tools/pyspark-4.1 by tests/support/iceberg_spark.py). Prints JSON: every
row, the rows per partition by SQL, and the offsets of the table's last snapshot as the
snapshots metadata table shows them.

    python iceberg_read.py CATALOG_URI WAREHOUSE PROPERTIES_JSON TOPIC JAR...
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from headwater.iceberg.spark_conf import catalog_conf


def main() -> None:
    catalog_uri, warehouse, properties, topic, *jars = sys.argv[1:]
    builder = (SparkSession.builder.master("local[1]").appName("iceberg-read")
               .config("spark.jars", ",".join(jars))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in catalog_conf(catalog_uri, warehouse, json.loads(properties)).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    table = f"headwater.db.`{topic}`"
    rows = spark.sql(
        f"SELECT partition, offset, unix_micros(timestamp) AS ts, hex(key) AS key, "
        f"hex(value) AS value, transform(headers, h -> array(h.key, hex(h.value))) AS headers "
        f"FROM {table}").collect()
    counts = spark.sql(f"SELECT partition, count(*) AS n FROM {table} GROUP BY partition")
    offsets = spark.sql(f"SELECT summary['headwater.offsets'] AS o FROM {table}.snapshots "
                        f"ORDER BY committed_at DESC LIMIT 1").collect()
    print(json.dumps({
        "version": spark.version,
        "rows": [[r.partition, r.offset, r.ts, r.key, r.value,
                  [list(h) for h in r.headers or []]] for r in rows],
        "counts": {str(r.partition): r.n for r in counts.collect()},
        "offsets": json.loads(offsets[0].o) if offsets and offsets[0].o else {},
    }))
    spark.stop()


if __name__ == "__main__":
    main()
