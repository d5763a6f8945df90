"""Spark's catalog configs from the broker's catalog URI (headwater/iceberg/spark_conf.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.iceberg.spark_conf import CatalogUriError, catalog_conf, jdbc_properties


def test_sqlite_paths_absolute_and_relative() -> None:
    assert jdbc_properties("sqlite:////data/iceberg/catalog.db") == {
        "uri": "jdbc:sqlite:/data/iceberg/catalog.db"}
    assert jdbc_properties("sqlite:///catalog.db") == {"uri": "jdbc:sqlite:catalog.db"}


def test_postgresql_credentials_move_to_jdbc_properties_unquoted() -> None:
    assert jdbc_properties("postgresql+asyncpg://us%40r:p%3Aw@10.0.0.5:5433/hw") == {
        "uri": "jdbc:postgresql://10.0.0.5:5433/hw", "jdbc.user": "us@r",
        "jdbc.password": "p:w"}
    assert jdbc_properties("postgresql:///hw") == {"uri": "jdbc:postgresql://localhost/hw"}


@pytest.mark.parametrize("uri", ["mysql://h/db", "catalog.db", "sqlite://", "sqlite:///"])
def test_what_the_jdbc_catalog_cannot_reach_is_refused(uri: str) -> None:
    with pytest.raises(CatalogUriError):
        jdbc_properties(uri)


def test_the_spark_catalog_is_named_headwater() -> None:
    conf = catalog_conf("sqlite:////d/c.db", "file:///d/wh")
    assert conf["spark.sql.catalog.headwater"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.headwater.type"] == "jdbc"
    assert conf["spark.sql.catalog.headwater.warehouse"] == "file:///d/wh"


def test_the_cli_prints_options_for_pyspark(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import shlex
    from pathlib import Path

    from headwater.iceberg.command import print_spark_conf

    print_spark_conf(argparse.Namespace(data_dir=Path("/srv/hw"), catalog_uri=None,
                                        warehouse=None))
    words = shlex.split(capsys.readouterr().out)
    assert words[0] == "--packages" and "iceberg-spark-runtime-4.1_2.13:1.12.0" in words[1]
    assert "spark.sql.catalog.headwater.uri=jdbc:sqlite:/srv/hw/iceberg/catalog.db" in words
    assert "spark.sql.catalog.headwater.warehouse=file:///srv/hw/iceberg/warehouse" in words


def test_a_clusters_object_store_is_read_through_s3fileio() -> None:
    conf = catalog_conf("postgresql+psycopg2://u:p@h:5432/d", "s3://bucket/pre/iceberg", {
        "s3.endpoint": "http://127.0.0.1:7070", "s3.access-key-id": "ak",
        "s3.secret-access-key": "sk", "s3.region": "eu-west-1"})
    prefix = "spark.sql.catalog.headwater."
    assert {k.removeprefix(prefix): v for k, v in conf.items() if k.startswith(prefix)} == {
        "type": "jdbc", "warehouse": "s3://bucket/pre/iceberg",
        "uri": "jdbc:postgresql://h:5432/d", "jdbc.user": "u", "jdbc.password": "p",
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.path-style-access": "true",
        "s3.endpoint": "http://127.0.0.1:7070", "s3.access-key-id": "ak",
        "s3.secret-access-key": "sk", "client.region": "eu-west-1"}


def test_a_cluster_brokers_config_gives_the_shared_catalog_and_its_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json
    import shlex

    from headwater.iceberg.command import print_spark_conf

    props = tmp_path / "server.properties"
    props.write_text("headwater.storage=shared\n"
                     "headwater.shared.database=postgresql://hw:pw@10.0.0.5:5432/log\n"
                     "headwater.shared.objects=s3://bucket/hw\n"
                     "headwater.shared.objects.endpoint=http://10.0.0.6:7070\n"
                     "headwater.shared.objects.access.key=AK\nheadwater.shared.objects.secret.key=SK\n")
    print_spark_conf(argparse.Namespace(data_dir=None, config=props, catalog_uri=None,
                                        warehouse=None, connector=False))
    words = shlex.split(capsys.readouterr().out)
    assert "spark.sql.catalog.headwater.uri=jdbc:postgresql://10.0.0.5:5432/log" in words
    assert "spark.sql.catalog.headwater.warehouse=s3://bucket/hw/iceberg" in words
    assert "spark.sql.catalog.headwater.s3.endpoint=http://10.0.0.6:7070" in words
    assert "spark.sql.catalog.headwater.s3.secret-access-key=SK" in words

    print_spark_conf(argparse.Namespace(data_dir=None, config=props, catalog_uri=None,
                                        warehouse=None, connector=True))
    options = json.loads(capsys.readouterr().out)
    assert options["historyFromTable"] == "true"
    assert options["iceberg.uri"] == "postgresql+psycopg2://hw:pw@10.0.0.5:5432/log"
    assert options["iceberg.s3.access-key-id"] == "AK"
    assert options["iceberg.namespace"] == "db"


def test_a_config_that_is_not_a_clusters_names_the_setting(tmp_path: Path) -> None:
    import argparse

    from headwater.iceberg.command import print_spark_conf

    props = tmp_path / "server.properties"
    props.write_text("headwater.storage=shared\n")
    with pytest.raises(SystemExit, match="headwater.shared.database"):
        print_spark_conf(argparse.Namespace(data_dir=None, config=props, catalog_uri=None,
                                            warehouse=None, connector=False))
