"""The object store holding the shared log's bytes: any S3-API service, or a local
directory for one machine, through obstore.

Only what needs no compare-and-swap is asked of it (all ordering is PostgreSQL's):
create an object under a fresh key (`put_new`, refused if the key exists), read a byte
range, delete, list. `check` writes, reads and deletes a probe object at start, so an
unreachable store or refused credentials are one line naming
`headwater.shared.objects` rather than a failure at the first produce.

Over HTTPS the store's certificate is checked against the system's CAs and those of
`headwater.shared.objects.ssl.truststore.location` (obstore's `root_certificate`, added to
the system's); a certificate that does not verify is one line naming that setting, at
once (no retry would mend it). Nothing turns verification off.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import obstore
from obstore.exceptions import BaseError
from obstore.store import LocalStore, S3Store

from .settings import ENDPOINT, OBJECTS, TRUSTSTORE, SettingError, SharedSettings

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

PROBE_PREFIX = "probe/"
WAL_PREFIX = "wal/"  # the commit windows' objects
SEGMENT_PREFIX = "seg/"  # one partition's batches, merged or compacted (upkeep.py)
DATA_PREFIXES = (WAL_PREFIX, SEGMENT_PREFIX)


#: How rustls names a certificate it refused, in obstore's error text (UnknownIssuer,
#: BadSignature, NotValidForName, Expired, ...).
_REFUSED_CERTIFICATE = re.compile(r"InvalidCertificate\(\s*(\w+)")


class ObjectStoreUnavailable(RuntimeError):
    """The store named by `headwater.shared.objects` cannot be used; `retry`: it may be
    an outage (a start waits for it), not the settings."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


def _root_certificates(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingError(f"{TRUSTSTORE}={path}: cannot be read: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None


class ObjectStore:
    def __init__(self, settings: SharedSettings, timeout_s: float = 30.0,
                 retries: int = 3) -> None:
        self.url = settings.objects
        self.endpoint = settings.endpoint
        self.truststore = settings.truststore
        self._masked = settings.masked
        url = urlparse(settings.objects)
        self._store: LocalStore | S3Store
        if url.scheme == "file":
            self._store = LocalStore(url.path, mkdir=True)
        else:
            config: S3Config = {"region": settings.region, "unsigned_payload": True}
            if settings.endpoint:
                config["endpoint"] = settings.endpoint
                config["virtual_hosted_style_request"] = False
            if settings.access_key:
                config["access_key_id"] = settings.access_key
                config["secret_access_key"] = settings.secret_key
            client: ClientConfig = {
                "allow_http": settings.endpoint.startswith("http://"),
                "timeout": timedelta(seconds=timeout_s),
                "connect_timeout": timedelta(seconds=min(timeout_s, 5.0))}
            if settings.truststore:
                client["root_certificate"] = _root_certificates(settings.truststore)
            retry: RetryConfig = {"max_retries": retries,
                                  "retry_timeout": timedelta(seconds=timeout_s)}
            try:
                self._store = S3Store(url.netloc, prefix=url.path.strip("/") or None,
                                      config=config, client_options=client,
                                      retry_config=retry)
            except (BaseError, ValueError) as exc:
                if settings.truststore and "ertificate" in str(exc):  # the CAs parsed
                    raise SettingError(f"{TRUSTSTORE}={settings.truststore}: not PEM "
                                       f"certificates: {_first_line(exc)}") from None
                raise SettingError(settings.masked(f"{OBJECTS}={self.url}: "
                                                   f"{_first_line(exc)}")) from None

    @staticmethod
    def new_key(prefix: str = "") -> str:
        """A fresh key: never reused, so a create cannot meet an old object."""
        return f"{prefix}{uuid.uuid4().hex}"

    async def put_new(self, key: str,
                      data: bytes | bytearray | memoryview | Sequence[bytes | bytearray]
                      ) -> None:
        """Create the object (from one buffer, or the concatenation of several: handed
        to obstore as they are, which joins them off the event loop's thread); an error
        if the key is taken."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            await obstore.put_async(self._store, key, data, mode="create")
        else:
            await obstore.put_async(self._store, key, data, mode="create",
                                    use_multipart=False)

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        return bytes(await obstore.get_range_async(self._store, key, start=start,
                                                   length=length))

    async def get(self, key: str) -> bytes:
        result = await obstore.get_async(self._store, key)
        return bytes(await result.bytes_async())

    async def delete(self, key: str) -> None:
        await obstore.delete_async(self._store, key)

    async def keys(self, prefix: str = "") -> list[str]:
        out: list[str] = []
        async for chunk in obstore.list(self._store, prefix=prefix or None):
            out.extend(meta["path"] for meta in chunk)
        return out

    async def listing(self, prefix: str = "") -> list[tuple[str, datetime]]:
        """(key, last modified) of every object under `prefix`."""
        out: list[tuple[str, datetime]] = []
        async for chunk in obstore.list(self._store, prefix=prefix or None):
            out.extend((meta["path"], meta["last_modified"]) for meta in chunk)
        return out

    async def check(self) -> None:
        """Write, read back and delete a probe object; ObjectStoreUnavailable naming the
        setting when any step fails."""
        key = self.new_key(PROBE_PREFIX)
        try:
            await self.put_new(key, b"headwater")
            if await self.get_range(key, 0, 9) != b"headwater":
                raise ObjectStoreUnavailable(f"{OBJECTS}={self.url}: a probe object read "
                                             "back different bytes")
            await self.delete(key)
        except (BaseError, OSError, ValueError) as exc:
            refused = _REFUSED_CERTIFICATE.search(str(exc))
            if refused is not None:
                raise ObjectStoreUnavailable(self._refused(refused.group(1)),
                                             retry=False) from exc
            raise ObjectStoreUnavailable(self._masked(
                f"{OBJECTS}={self.url}: {type(exc).__name__}: {_first_line(exc)}")) from exc

    def _refused(self, reason: str) -> str:
        where = f"the certificate of {ENDPOINT}={self.endpoint} did not verify ({reason})"
        if self.truststore:
            return f"{TRUSTSTORE}={self.truststore}: {where}: is it the CA that signed it?"
        return (f"{OBJECTS}={self.url}: {where} against the system's CAs: set {TRUSTSTORE} "
                "to a PEM file of the CA that signed it")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""
