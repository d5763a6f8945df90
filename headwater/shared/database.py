"""The broker's PostgreSQL connection pool, with errors that name the setting.

A wrong DSN, an unreachable server or refused credentials at start are one line naming
`headwater.shared.database` (the password left out), never a traceback.
"""

from __future__ import annotations

import logging

import asyncpg

from .. import __version__
from .schema import migrate
from .settings import DATABASE, SharedSettings

log = logging.getLogger("headwater.shared")

CONNECT_TIMEOUT_S = 10.0


class DatabaseUnavailable(RuntimeError):
    """The database named by `headwater.shared.database` cannot be used."""


async def open_pool(settings: SharedSettings, min_size: int = 2,
                    max_size: int = 8) -> asyncpg.Pool:
    """A pool on the shared database, its schema migrated to this broker's version."""
    where = settings.redacted_database()
    try:
        pool = await asyncpg.create_pool(settings.database, min_size=min_size,
                                         max_size=max_size, timeout=CONNECT_TIMEOUT_S)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        raise DatabaseUnavailable(f"{DATABASE}={where}: cannot connect: "
                                  f"{type(exc).__name__}: {exc}") from exc
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
