"""Kafka's error codes are kio's ErrorCode members everywhere in headwater: no module spells
one as its own integer constant (`NOT_COORDINATOR = 16`, `NONE = int(ErrorCode.none)`).

A code written by hand can be wrong or drift from its name; an ErrorCode member carries both,
and being an IntEnum it reaches the wire as the same number.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kio.schema.errors import ErrorCode

import headwater

ROOT = Path(headwater.__file__).parent


def _value(node: ast.expr) -> int | None:
    """The integer a constant's value spells: a literal, a negated one or int(ErrorCode.x)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        return -node.operand.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Attribute)
            and node.args[0].attr in ErrorCode.__members__):
        return int(ErrorCode[node.args[0].attr])
    return None


def error_code_constants(source: str) -> list[str]:
    found = []
    for statement in ast.parse(source).body:
        if not (isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None):
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            member = ErrorCode.__members__.get(target.id.lower())
            if member is not None and _value(statement.value) == int(member):
                found.append(f"{target.id} = {int(member)}")
    return found


def test_the_check_finds_a_code_spelled_as_a_number() -> None:
    source = ("NOT_COORDINATOR = 16\nNONE: int = 0\nNEG = -1\n"
              "INVALID_REQUEST = int(ErrorCode.invalid_request)\nMAX_EPOCH = 32767\n")
    assert error_code_constants(source) == ["NOT_COORDINATOR = 16", "NONE = 0",
                                            "INVALID_REQUEST = 42"]


def test_no_module_defines_its_own_error_code_constants() -> None:
    offenders = {
        str(path.relative_to(ROOT.parent)): found
        for path in sorted(ROOT.rglob("*.py"))
        if (found := error_code_constants(path.read_text()))
    }
    assert offenders == {}, "use kio's ErrorCode members (ErrorCode as E) instead"
