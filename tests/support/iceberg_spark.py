"""Spark SQL over a topic's Iceberg table, as a user reads it: Apache Iceberg's Spark
runtime (1.12.0, built for Spark 4.1: none is published for newer Sparks) and JDBC
catalog, on the pyspark 4.1 of `make iceberg-spark`, in a process of its own
(tests/spark/iceberg_read.py; the tests' own process runs the project's pyspark 4.3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from .iceberg_tables import Catalog
from .kafka_reference import ROOT

PYSPARK_41 = ROOT / ".tools" / "pyspark-4.1"
ICEBERG_JARS = ROOT / ".kafka" / "iceberg"
HINT = "Spark's Iceberg runtime is missing: run `make iceberg-spark` (make test does)"


def spark_read(catalog: Catalog, topic: str, timeout: float = 240) -> dict[str, Any]:
    """iceberg_read.py's JSON: every row (partition, offset, timestamp in microseconds,
    key and value in hex, headers), the rows per partition by SQL, the last snapshot's
    offsets and Spark's version."""
    from tests.spark.conftest import spark_env

    jars = sorted(str(p) for p in ICEBERG_JARS.glob("*.jar"))
    if not jars or not (PYSPARK_41 / ".installed").exists():
        pytest.fail(HINT, pytrace=False)
    env = {k: v for k, v in spark_env().items() if k != "SPARK_HOME"}
    env["PYTHONPATH"] = os.pathsep.join([str(PYSPARK_41), str(ROOT)])
    uri, warehouse, properties = catalog
    script = ROOT / "tests" / "spark" / "iceberg_read.py"
    done = subprocess.run([sys.executable, str(script), uri, warehouse,
                           json.dumps(properties), topic, *jars],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
