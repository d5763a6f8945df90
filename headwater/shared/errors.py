"""The errors that stop a shared broker at start, each one line naming its setting."""

from __future__ import annotations

from .database import DatabaseUnavailable
from .objects import ObjectStoreUnavailable
from .schema import SchemaTooNew
from .settings import SettingError

STARTUP_ERRORS: tuple[type[Exception], ...] = (
    SettingError, DatabaseUnavailable, ObjectStoreUnavailable, SchemaTooNew)
