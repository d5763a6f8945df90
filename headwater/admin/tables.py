"""Aligned text tables (or JSON) for CLI output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def render(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str("-" if v is None else v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]
    return "\n".join(lines)


def emit(headers: Sequence[str], rows: Sequence[Sequence[Any]], as_json: bool) -> str:
    if as_json:
        keys = [h.lower().replace("-", "_") for h in headers]
        return json.dumps([dict(zip(keys, row, strict=True)) for row in rows], indent=2,
                          default=str)
    return render(headers, rows)
