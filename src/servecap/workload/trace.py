"""Trace files: one request per row, replayed with their recorded arrival times and lengths.

Formats (chosen by extension: ``.csv``, or ``.jsonl`` / ``.ndjson``):

- CSV with a header row naming the columns ``arrival_s,prompt_tokens,output_tokens`` and
  optionally ``prefix_group,prefix_tokens`` (extra columns are an error);
- JSONL, one object per line with the same keys, e.g.
  ``{"arrival_s": 0.52, "prompt_tokens": 812, "output_tokens": 143}``.

``arrival_s`` is seconds from the start of the trace (non-negative; rows may be unsorted, they are
sorted by time, ties kept in file order); token counts are positive integers (``prompt_tokens``
includes any ``prefix_tokens``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from servecap.errors import ServecapError
from servecap.files import MAX_DATA_BYTES, loads_json, read_text

REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL = ("prefix_group", "prefix_tokens")


@dataclass(frozen=True, slots=True)
class ArrivalTrace:
    """A trace file's requests as columns, sorted by arrival (ties in file order)."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    prefix_group: NDArray[np.int64]  # -1: no shared prefix
    prefix_tokens: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.arrival_s)


def load_trace(path: Path) -> ArrivalTrace:
    """Read and validate a trace; errors name the file, line and column."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise ServecapError("arrival.path", str(path), "trace must be .csv or .jsonl")
    text = read_text(path, "arrival.path", max_bytes=MAX_DATA_BYTES)
    rows = _csv_rows(path, text) if suffix == ".csv" else _jsonl_rows(path, text)
    if not rows:
        raise ServecapError("arrival.path", str(path), "trace has no requests")
    n = len(rows)
    arr = np.empty(n)
    prompt = np.empty(n, dtype=np.int64)
    output = np.empty(n, dtype=np.int64)
    group = np.full(n, -1, dtype=np.int64)
    ptok = np.zeros(n, dtype=np.int64)
    for i, (line, row) in enumerate(rows):
        where = f"{path.name}:{line}"
        arr[i] = _number(row, "arrival_s", where, minimum=0.0)
        prompt[i] = int(_number(row, "prompt_tokens", where, minimum=1, integer=True))
        output[i] = int(_number(row, "output_tokens", where, minimum=1, integer=True))
        if row.get("prefix_group") not in (None, ""):
            group[i] = int(_number(row, "prefix_group", where, minimum=0, integer=True))
            ptok[i] = int(_number(row, "prefix_tokens", where, minimum=0, integer=True))
            if ptok[i] > prompt[i]:
                raise ServecapError(f"{where}.prefix_tokens", int(ptok[i]), f"exceeds prompt_tokens {prompt[i]}")
    order = np.argsort(arr, kind="stable")
    return ArrivalTrace(arr[order], prompt[order], output[order], group[order], ptok[order])


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        _check_keys(header, f"{path.name}:1")
        return [
            (i + 2, dict(row))
            for i, row in enumerate(reader)
            if any((v if isinstance(v, str) else "").strip() for v in row.values())
        ]
    except csv.Error as err:
        raise ServecapError("arrival.path", str(path), f"malformed CSV: {err}") from None


def _jsonl_rows(path: Path, whole: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for i, text in enumerate(whole.splitlines(), start=1):
        if not text.strip():
            continue
        obj = loads_json(text, f"{path.name}:{i}", text[:60])
        if not isinstance(obj, dict):
            raise ServecapError(f"{path.name}:{i}", text[:60], "each line must be a JSON object")
        _check_keys(list(obj), f"{path.name}:{i}")
        rows.append((i, obj))
    return rows


def _check_keys(keys: Sequence[str], where: str) -> None:
    from servecap.errors import did_you_mean

    allowed = REQUIRED + OPTIONAL
    for key in keys:
        if key not in allowed:
            raise ServecapError(
                where, key, "unknown column" + did_you_mean(key, allowed) + f"; allowed: {', '.join(allowed)}"
            )
    for key in REQUIRED:
        if key not in keys:
            raise ServecapError(where, key, "missing required column")


def _number(row: dict[str, Any], key: str, where: str, *, minimum: float, integer: bool = False) -> float:
    raw = row.get(key)
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ServecapError(f"{where}.{key}", raw, "not a number") from None
    if not np.isfinite(value) or value < minimum:
        raise ServecapError(f"{where}.{key}", raw, f"must be a finite number >= {minimum:g}")
    if integer and value != int(value):
        raise ServecapError(f"{where}.{key}", raw, "must be an integer")
    return value
