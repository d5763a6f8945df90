"""The one exception the log package raises, carrying a Kafka error code.

Handlers put `code` straight into the per-partition error field of their response, so the
log never needs to know which API it serves. The storage layer raises with kio's `ErrorCode`
members (`LogError(E.corrupt_message, ...)`); an IntEnum, a code is still the int Kafka sends.
"""

from __future__ import annotations


class LogError(Exception):
    """A storage failure that maps to a Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"LogError({self.code}, {self.message!r})"


class RecordValidationError(LogError):
    """A batch rejected because of some of its records (Kafka's RecordValidationException,
    KIP-467): `record_errors` holds (batch_index, message) for each offending record, which
    Produce v8+ returns so a client fails exactly those records and may resend the rest."""

    def __init__(self, code: int, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


class CommitError(LogError):
    """`PartitionStore.commit` could not make some appends durable: `failed` names the
    (topic, partition)s whose appends must not be acknowledged (`code`: what to answer,
    a retriable one; the client's retry is checked by idempotence)."""

    def __init__(self, code: int, message: str, failed: set[tuple[str, int]]) -> None:
        super().__init__(code, message)
        self.failed = failed
