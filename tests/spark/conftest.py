"""Spark fixtures: one local[2] SparkSession per test module (session start costs ~5 s).

Java 17 is a hard requirement of the connector's tests: when it is missing they fail
with a message saying how to install it (``make test`` installs it), they never skip.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.kafka_reference import SPARK_KAFKA_LIB

JAVA_HINT = ("Java 17 is required for the Spark connector tests: run `make java` or "
             "`apt-get install -y openjdk-17-jre-headless`")


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)', out)
    return int(m.group(1)) if m else None


def ensure_java17() -> None:
    """Point Spark at a Java 17 (PATH first, then Debian's JVM directory), or fail."""
    home = os.environ.get("JAVA_HOME")
    if home and _java_major(os.path.join(home, "bin", "java")) == 17:
        return
    java = shutil.which("java")
    if java and _java_major(java) == 17:
        return
    for home in sorted(glob.glob("/usr/lib/jvm/java-17-openjdk*")):
        if _java_major(os.path.join(home, "bin", "java")) == 17:
            os.environ["JAVA_HOME"] = home
            return
    pytest.fail(JAVA_HINT, pytrace=False)


def spark_env() -> dict[str, str]:
    """What a Spark driver process needs: workers must run this interpreter (the venv with
    pyarrow and the connector installed), not whatever `python3` is on PATH."""
    ensure_java17()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return dict(os.environ)


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector (`make kafka` puts it in .kafka/spark/), for
    format("kafka") beside format("headwater")."""
    return sorted(str(p) for p in SPARK_KAFKA_LIB.glob("*.jar"))


def build_session(app: str, master: str = "local[2]"):
    """Every session gets Spark's Kafka connector jars: `spark.jars` only reaches the
    driver's classpath when it launches the JVM, which the first module's session does
    for the whole pytest process; adding them to a later session would be too late."""
    from pyspark.sql import SparkSession

    spark_env()
    builder = SparkSession.builder
    jars = spark_kafka_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = (builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[object]:
    session = build_session(request.module.__name__)
    yield session
    session.stop()
