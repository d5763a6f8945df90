"""Test-only fault points in the controller's metadata writes.

`--override headwater.test.metadata.fault=VALUE` arms one, reached after a metadata
transaction's BeginTransaction batch is in the log, before its next batch:

* `fail-append-after-begin`: that append fails once (an I/O error, as a full disk gives);
* `kill-after-begin`: the process dies there (SIGKILL, as `kill -9`).

Nothing reads the key in production; unset, these are no-ops.
"""

from __future__ import annotations

import logging
import os
import signal

from ..config import BrokerConfig

KEY = "headwater.test.metadata.fault"
log = logging.getLogger("headwater.controller")
_fired: set[str] = set()


def after_begin(config: BrokerConfig) -> None:
    fault = config.get(KEY) or ""
    if fault == "fail-append-after-begin" and fault not in _fired:
        _fired.add(fault)
        raise OSError(28, "No space left on device (headwater.test.metadata.fault)")
    if fault == "kill-after-begin":
        log.critical("%s=kill-after-begin: killing the process", KEY)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
