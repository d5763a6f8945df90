"""Spark's side of the topics' Iceberg tables: the configs that make
``spark.table("headwater.db.<topic>")`` read what the broker's table writer commits,
through Apache Iceberg's own Spark runtime and its JDBC catalog (docs/iceberg.md).

The broker names its catalog in SQLAlchemy's form (``headwater.iceberg.catalog.uri``, as
pyiceberg's SQL catalog takes it); Iceberg's JDBC catalog reads the same rows given the
JDBC form of the same database. Nothing here reads a table: Iceberg's runtime does.
Here and not in pyspark_headwater: the runtime needs a pyspark 4.1, on which the
connector (pyspark >= 4.2) does not import; this module imports neither.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

#: The Spark catalog's name: Iceberg's JDBC catalog finds the tables by it, and the
#: writer stores it in every row of the catalog (``catalog_name``).
CATALOG = "headwater"
#: Maven coordinates of what Spark needs beside pyspark (``spark.jars.packages``): the
#: newest Iceberg runtime, built for Spark 4.1, and the catalogs' JDBC drivers.
PACKAGES = ("org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
            "org.apache.iceberg:iceberg-aws-bundle:1.12.0",
            "org.xerial:sqlite-jdbc:3.54.1.0", "org.postgresql:postgresql:42.7.14")
#: pyiceberg's S3 properties (the writer's) as Iceberg's S3FileIO names them.
_S3 = {"s3.endpoint": "s3.endpoint", "s3.access-key-id": "s3.access-key-id",
       "s3.secret-access-key": "s3.secret-access-key", "s3.region": "client.region"}


class CatalogUriError(ValueError):
    """A catalog URI whose database Iceberg's JDBC catalog cannot reach."""


def catalog_conf(catalog_uri: str, warehouse: str,
                 properties: dict[str, str] | None = None) -> dict[str, str]:
    """Spark configs for the broker's catalog at `catalog_uri` (SQLAlchemy's form:
    ``sqlite:////data/iceberg/catalog.db``, ``postgresql+asyncpg://u:p@host/db``) with its
    files under `warehouse` (`properties`: the writer's file IO properties, a cluster's
    object store endpoint and keys); pass them to ``SparkSession.builder.config``."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    conf = {
        "spark.sql.extensions":
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.warehouse": warehouse,
    }
    conf.update({f"{prefix}.{k}": v for k, v in jdbc_properties(catalog_uri).items()})
    if warehouse.startswith("s3://"):  # a cluster's object store, path-style as the
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"  # broker's
        conf[f"{prefix}.s3.path-style-access"] = "true"
        conf.update({f"{prefix}.{_S3[k]}": v for k, v in (properties or {}).items()
                     if k in _S3})
    return conf


def jdbc_properties(catalog_uri: str) -> dict[str, str]:
    """The JDBC catalog's ``uri`` (and ``jdbc.user``/``jdbc.password``) for a SQLAlchemy
    URI of SQLite or PostgreSQL."""
    scheme, sep, rest = catalog_uri.partition("://")
    dialect = scheme.split("+", 1)[0]
    if not sep:
        raise CatalogUriError(f"not a SQLAlchemy URI: {catalog_uri!r}")
    if dialect == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute.db: the path follows the third /.
        if not rest.startswith("/") or rest == "/":
            raise CatalogUriError(f"a SQLite catalog needs a file: {catalog_uri!r}")
        return {"uri": f"jdbc:sqlite:{rest[1:]}"}
    if dialect in ("postgresql", "postgres"):
        parts = urlsplit(f"postgresql://{rest}")
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        props = {"uri": f"jdbc:postgresql://{host}{port}{parts.path}"}
        if parts.username:
            props["jdbc.user"] = unquote(parts.username)
        if parts.password:
            props["jdbc.password"] = unquote(parts.password)
        return props
    raise CatalogUriError(f"Iceberg's JDBC catalog here reads SQLite or PostgreSQL, "
                          f"not {dialect!r}: {catalog_uri!r}")
