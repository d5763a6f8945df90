"""The shared log's settings, Kafka-style keys of the broker config.

`headwater.storage` picks the engine: `local` (segment files in `log.dirs`, the default)
or `shared`. A shared broker needs `headwater.shared.database` (a PostgreSQL DSN) and
`headwater.shared.objects` (`s3://bucket[/prefix]`, or `file:///path` for one machine);
an S3 service is reached at `headwater.shared.objects.endpoint` with
`headwater.shared.objects.access.key` / `.secret.key` / `.region`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from ..config import BrokerConfig

STORAGE = "headwater.storage"
DATABASE = "headwater.shared.database"
OBJECTS = "headwater.shared.objects"
ENDPOINT = "headwater.shared.objects.endpoint"
ACCESS_KEY = "headwater.shared.objects.access.key"
SECRET_KEY = "headwater.shared.objects.secret.key"
REGION = "headwater.shared.objects.region"

class SettingError(ValueError):
    """A shared-log setting is missing or malformed; the message names the key."""


@dataclass(frozen=True, slots=True)
class SharedSettings:
    database: str
    objects: str
    endpoint: str = ""
    access_key: str = ""
    secret_key: str = ""
    region: str = "us-east-1"

    @classmethod
    def from_config(cls, config: BrokerConfig) -> SharedSettings:
        def get(key: str) -> str:
            return config.get_str(key).strip()  # the registry's default when unset

        engine = get(STORAGE)
        if engine not in ("local", "shared"):
            raise SettingError(f"{STORAGE}={engine!r}: must be 'local' or 'shared'")
        database, objects = get(DATABASE), get(OBJECTS)
        if not database:
            raise SettingError(f"{DATABASE} is empty: a shared broker needs a PostgreSQL "
                               "DSN (postgresql://user@host:port/dbname)")
        if not database.startswith(("postgresql://", "postgres://")):
            raise SettingError(f"{DATABASE}={database!r}: not a postgresql:// DSN")
        url = urlparse(objects)
        if url.scheme not in ("s3", "file") or (url.scheme == "s3" and not url.netloc) \
                or (url.scheme == "file" and not url.path):
            raise SettingError(f"{OBJECTS}={objects!r}: must be s3://bucket[/prefix] or "
                               "file:///path")
        return cls(database, objects, get(ENDPOINT), get(ACCESS_KEY), get(SECRET_KEY),
                   get(REGION))

    def redacted_database(self) -> str:
        """The DSN without its password, for log lines."""
        url = urlparse(self.database)
        if url.password is None:
            return self.database
        netloc = url.netloc.replace(f":{url.password}@", ":***@")
        return url._replace(netloc=netloc).geturl()
