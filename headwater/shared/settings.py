"""The shared log's settings, Kafka-style keys of the broker config.

`headwater.storage` picks the engine: `local` (segment files in `log.dirs`, the default)
or `shared`. A shared broker needs `headwater.shared.database` (a PostgreSQL DSN) and
`headwater.shared.objects` (`s3://bucket[/prefix]`, or `file:///path` for one machine);
an S3 service is reached at `headwater.shared.objects.endpoint` with
`headwater.shared.objects.access.key` / `.secret.key` / `.region`.

TLS to PostgreSQL is the DSN's, in libpq's words (`sslmode=verify-full&sslrootcert=...`,
`sslcert`/`sslkey` for a client certificate), which asyncpg honours as it does
`PGPASSWORD` and `PGPASSFILE`; an HTTPS object store is checked against the system's CAs
and those of `headwater.shared.objects.ssl.truststore.location` (a PEM file). The
secrets (the DSN's password and `sslpassword`, the S3 secret key) never reach a log
line: `redacted_database` and `masked` replace them with `***`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, unquote_plus, urlparse

from ..config import BrokerConfig

STORAGE = "headwater.storage"
DATABASE = "headwater.shared.database"
OBJECTS = "headwater.shared.objects"
ENDPOINT = "headwater.shared.objects.endpoint"
ACCESS_KEY = "headwater.shared.objects.access.key"
SECRET_KEY = "headwater.shared.objects.secret.key"
REGION = "headwater.shared.objects.region"
TRUSTSTORE = "headwater.shared.objects.ssl.truststore.location"

#: The DSN's files, checked at start: a path mistyped is a line naming it, not a TLS
#: error from deep in a connection attempt.
_DSN_FILES = ("sslrootcert", "sslcert", "sslkey")
_DSN_SECRETS = re.compile(r"((?:^|&)(?:ssl)?password=)([^&]*)")  # in a query
MASK = "***"
#: Shorter secrets are not searched for in messages (`masked`): one of two letters
#: would garble every line it met, and is no secret worth the name.
_MASKED_FROM = 4


def redact_dsn(dsn: str) -> str:
    """`dsn` with its secrets (the password, `password=` and `sslpassword=`) `***`."""
    url = urlparse(dsn)
    netloc = url.netloc
    if url.password is not None:
        netloc = netloc.replace(f":{url.password}@", f":{MASK}@")
    query = _DSN_SECRETS.sub(rf"\1{MASK}", url.query)
    return url._replace(netloc=netloc, query=query).geturl()


class SettingError(ValueError):
    """A shared-log setting is missing or malformed; the message names the key."""


@dataclass(frozen=True, slots=True)
class SharedSettings:
    database: str = field(repr=False)  # may hold a password
    objects: str
    endpoint: str = ""
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    region: str = "us-east-1"
    #: A PEM file of CA certificates the object store's is checked against, beside
    #: the system's ("": the system's alone).
    truststore: str = ""

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
            raise SettingError(f"{DATABASE}={redact_dsn(database)!r}: not a postgresql:// "
                               "DSN")
        query = parse_qs(urlparse(database).query)
        for name in _DSN_FILES:
            for path in query.get(name, ()):
                if not os.access(path, os.R_OK):
                    raise SettingError(f"{DATABASE}: {name}={path} cannot be read")
        url = urlparse(objects)
        if url.scheme not in ("s3", "file") or (url.scheme == "s3" and not url.netloc) \
                or (url.scheme == "file" and not url.path):
            raise SettingError(f"{OBJECTS}={objects!r}: must be s3://bucket[/prefix] or "
                               "file:///path")
        endpoint, truststore = get(ENDPOINT), get(TRUSTSTORE)
        if truststore and endpoint.startswith("http://"):
            raise SettingError(f"{TRUSTSTORE} is set but {ENDPOINT}={endpoint} is plain "
                               "HTTP: make it https:// (or unset the truststore)")
        return cls(database, objects, endpoint, get(ACCESS_KEY), get(SECRET_KEY),
                   get(REGION), truststore)

    def redacted_database(self) -> str:
        """The DSN without its secrets, for log and error lines."""
        return redact_dsn(self.database)

    def secrets(self) -> list[str]:
        """Every secret value these settings hold, as written and URL-decoded."""
        url = urlparse(self.database)
        found = [url.password or "", self.secret_key,
                 *(m.group(2) for m in _DSN_SECRETS.finditer(url.query))]
        return [s for v in found if v for s in {v, unquote(v), unquote_plus(v)}]

    def masked(self, text: str) -> str:
        """`text` (an error's message, say) with every secret replaced by `***`."""
        for secret in sorted(self.secrets(), key=len, reverse=True):
            if len(secret) >= _MASKED_FROM:
                text = text.replace(secret, MASK)
        return text
