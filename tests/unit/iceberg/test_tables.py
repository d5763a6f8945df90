"""The topics' tables on a SQLite catalog (headwater/iceberg/tables.py)."""

from __future__ import annotations

from pathlib import Path

from headwater.iceberg.tables import key_value_schema, open_catalog, topic_table


def test_pyicebergs_own_commit_retries_are_off_new_table_or_old(tmp_path: Path) -> None:
    """A retry by pyiceberg would keep the stale offsets of its snapshot properties."""
    catalog = open_catalog(f"sqlite:///{tmp_path / 'c.db'}", (tmp_path / "wh").as_uri())
    table = topic_table(catalog, "db", "new", "hour(timestamp)")
    assert table.properties["commit.retry.num-retries"] == "0"
    catalog.create_table(("db", "old"), schema=key_value_schema())  # as before the fix
    assert "commit.retry.num-retries" not in catalog.load_table(("db", "old")).properties
    topic_table(catalog, "db", "old", "hour(timestamp)")
    assert catalog.load_table(("db", "old")).properties["commit.retry.num-retries"] == "0"
