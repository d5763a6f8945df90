"""The group coordinator's error codes are Kafka's: each name and number as kio has it."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from headwater.group import errors


def test_every_code_is_kafkas_by_name_and_number() -> None:
    codes = {name: value for name, value in vars(errors).items()
             if name.isupper() and isinstance(value, int)}
    assert len(codes) > 20
    for name, value in codes.items():
        assert int(ErrorCode[name.lower()]) == value, name
