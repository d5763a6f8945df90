"""The broker's PostgreSQL connection pool, with errors that name the setting.

A wrong DSN, an unreachable server or refused credentials at start are one line naming
`headwater.shared.database` (the password left out), never a traceback. TLS is the
DSN's (libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, which asyncpg reads); a
server certificate that does not verify, like refused credentials, is a line at once:
no retry would mend it.
"""

from __future__ import annotations

import logging
import ssl

import asyncpg

from .. import __version__
from .schema import migrate
from .settings import DATABASE, SharedSettings

log = logging.getLogger("headwater.shared")

CONNECT_TIMEOUT_S = 10.0
#: No statement of a broker's takes this long; one that does waits on a connection the
#: network lost without a reset (a blackhole), which would hold whatever awaits it (a
#: commit window, a transaction's markers) for good. It fails instead, as a dropped
#: connection does, and the pool opens a new one.
COMMAND_TIMEOUT_S = 30.0


class DatabaseUnavailable(RuntimeError):
    """The database named by `headwater.shared.database` cannot be used; `retry`: it may
    be an outage (a start waits for it), not the settings."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


#: Refusals that are the settings', not an outage's: the server's certificate not
#: trusted, the credentials or the client certificate refused (pg_hba.conf), a DSN
#: asyncpg cannot use (an sslmode it does not know, verify-full without a CA file).
SETTINGS_REFUSED = (ssl.SSLCertVerificationError,
                    asyncpg.InvalidAuthorizationSpecificationError,
                    asyncpg.ClientConfigurationError)


#: What the database going away looks like to a statement (restarted, a connection reset
#: or timed out, a server starting up): the broker retries these, logging one line.
OUTAGES = (TimeoutError, OSError, asyncpg.PostgresConnectionError,
           asyncpg.CannotConnectNowError, asyncpg.InterfaceError,
           asyncpg.IdleInTransactionSessionTimeoutError)


def session_settings(lease_ms: int) -> dict[str, str]:
    """Server settings of every broker connection that writes. A broker paused or stalled
    inside a transaction (SIGSTOP, a VM freeze) keeps its row locks while its session
    waits idle; the broker taking its partitions over would wait on them until it wakes.
    PostgreSQL ends such a session after a lease time (the broker has lost its leases by
    then, and its commit's outcome becomes unknown: it reloads, acknowledging nothing).
    A broker's own transactions never wait on anything but the database."""
    return {"idle_in_transaction_session_timeout": str(max(lease_ms, 1000))}


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"the server's certificate did not verify ({exc.verify_message}): is "
                "sslrootcert the CA that signed it, and the host a name it was issued to?")
    return f"{type(exc).__name__}: {exc}"


async def keep_session(_conn: asyncpg.Connection) -> None:
    """A pooled connection's release, after asyncpg rolls back what was left open: no
    reset query. The brokers' pooled sessions hold nothing to reset (no session
    settings beyond the connect-time ones, no LISTEN: listeners have connections of
    their own, only transaction-scoped advisory locks, no cursors), and asyncpg's
    default (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) is one more
    round trip after every commit window."""


async def open_pool(settings: SharedSettings, min_size: int = 2, max_size: int = 8,
                    lease_ms: int = 10_000) -> asyncpg.Pool:
    """A pool on the shared database, its schema migrated to this broker's version."""
    where = settings.redacted_database()
    try:
        pool = await asyncpg.create_pool(settings.database, min_size=min_size,
                                         max_size=max_size, timeout=CONNECT_TIMEOUT_S,
                                         command_timeout=COMMAND_TIMEOUT_S,
                                         server_settings=session_settings(lease_ms),
                                         reset=keep_session)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        raise DatabaseUnavailable(f"{DATABASE}={where}: cannot connect: "
                                  + settings.masked(_why(exc)),
                                  retry=not isinstance(exc, SETTINGS_REFUSED)) from exc
    try:
        async with pool.acquire() as conn:
            found, now = await migrate(conn, __version__)
    except BaseException:
        await pool.close()
        raise
    if found != now:
        log.info("shared database %s: schema migrated from version %d to %d", where,
                 found, now)
    return pool
