"""The one exception the log package raises, carrying a Kafka error code.

Handlers put `code` straight into the per-partition error field of their response, so the
log never needs to know which API it serves.
"""

from __future__ import annotations

OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
KAFKA_STORAGE_ERROR = 56
UNKNOWN_PRODUCER_ID = 59
INVALID_RECORD = 87


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
