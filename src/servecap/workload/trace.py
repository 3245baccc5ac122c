"""Trace files: one request per row, replayed with their recorded arrival times and lengths.

Formats (``format``; ``auto`` tells them apart by the CSV header or the first JSON line's keys):

- ``servecap`` -- CSV with a header row naming the columns ``arrival_s,prompt_tokens,output_tokens``
  and optionally ``prefix_group,prefix_tokens`` (extra columns are an error), or JSONL, one object
  per line with the same keys (and optionally ``hash_ids``), e.g.
  ``{"arrival_s": 0.52, "prompt_tokens": 812, "output_tokens": 143}``;
- ``mooncake`` -- block-hash JSONL (kvcache-ai/Mooncake ``FAST25-release/README.md``; the Qwen
  Bailian traces use the same keys): ``timestamp`` (ms from the trace's start), ``input_length``,
  ``output_length``, ``hash_ids`` (one id per ``trace_block_tokens`` = 512 prompt tokens, equal ids
  meaning an equal prefix; see :mod:`servecap.workload.block_hash`); other keys are ignored;
- ``azure`` -- Azure LLM inference traces 2023 and 2024 (Azure/AzurePublicDataset
  ``AzureLLMInferenceTrace_{code,conv}.csv``, ``AzureLLMInferenceTrace_*_1week.csv``): CSV with
  ``TIMESTAMP`` (a date and time, e.g. ``2023-11-16 18:17:03.9799600``, optionally with a
  ``+00:00`` offset), ``ContextTokens``, ``GeneratedTokens``; arrivals are seconds after the
  first row's time;
- ``burstgpt`` -- BurstGPT (HPMLL/BurstGPT ``data/BurstGPT_*.csv``): CSV with ``Timestamp``
  (seconds), ``Model``, ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``;
  failed requests (0 response tokens, the dataset's mark of a failure) are left out and counted
  in ``skipped``.

``arrival_s`` is seconds from the start of the trace (non-negative; rows may be unsorted, they are
sorted by time, ties kept in file order); token counts are positive integers (``prompt_tokens``
includes any ``prefix_tokens``). A ``mooncake`` row's ``output_length`` of 0 (a prefill-only
request) is replayed as 1 token, the first token every request makes. Every error names the
file, the line and the column.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from servecap.errors import ServecapError
from servecap.files import MAX_DATA_BYTES, read_text
from servecap.workload.arrival_trace import ArrivalTrace
from servecap.workload.block_hash import DEFAULT_TRACE_BLOCK_TOKENS
from servecap.workload.sessions import is_sessions_file

TraceFormat = Literal["auto", "servecap", "mooncake", "azure", "burstgpt", "sessions", "copilot"]
TRACE_FORMATS: tuple[str, ...] = ("auto", "servecap", "mooncake", "azure", "burstgpt", "sessions", "copilot")
REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL = ("prefix_group", "prefix_tokens")
_JSONL_OPTIONAL = (*OPTIONAL, "hash_ids")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
MAX_HASH_IDS = 1 << 20  # ids in one row (512 M tokens at 512 per id)


@dataclass(slots=True)
class _Rows:
    """Columns as they are read (file order)."""

    arrival_s: list[float] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    group: list[int] = field(default_factory=list)
    ptok: list[int] = field(default_factory=list)
    # every row's hash ids end to end (8 bytes an id, no list per row: a million-line trace's
    # ids are one array), and each row's count
    hash_ids: array[int] = field(default_factory=lambda: array("q"))
    hash_lens: list[int] = field(default_factory=list)
    skipped: int = 0

    def add(
        self, t: float, prompt: int, output: int, group: int = -1, ptok: int = 0, hashes: list[int] | None = None
    ) -> None:
        self.arrival_s.append(t)
        self.prompt.append(prompt)
        self.output.append(output)
        self.group.append(group)
        self.ptok.append(ptok)
        self.hash_lens.append(len(hashes) if hashes else 0)
        if hashes:
            self.hash_ids.extend(hashes)


def load_trace(
    path: Path,
    fmt: str = "auto",
    *,
    trace_block_tokens: int = DEFAULT_TRACE_BLOCK_TOKENS,
) -> ArrivalTrace:
    """Read and validate a trace; errors name the file, line and column."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise ServecapError("arrival.path", str(path), "trace must be .csv or .jsonl")
    if fmt == "sessions":
        raise ServecapError(
            "arrival.format", fmt, f"{path.name}: a sessions trace is a graph, read by servecap.workload.sessions"
        )
    if fmt == "copilot" or (fmt == "auto" and suffix != ".csv" and _copilot(path)):
        from servecap.workload.copilot_trace import load_copilot_trace

        return load_copilot_trace(path, trace_block_tokens=trace_block_tokens)
    if fmt not in TRACE_FORMATS:
        from servecap.errors import did_you_mean

        raise ServecapError("arrival.format", fmt, "unknown trace format" + did_you_mean(fmt, TRACE_FORMATS))
    text = read_text(path, "arrival.path", max_bytes=MAX_DATA_BYTES)
    if suffix == ".csv":
        if fmt == "mooncake":
            raise ServecapError("arrival.format", fmt, f"{path.name}: a mooncake trace is JSONL, not CSV")
        rows, fmt = _csv_trace(path, text, fmt)
    else:
        if fmt in ("azure", "burstgpt"):
            raise ServecapError("arrival.format", fmt, f"{path.name}: a trace of format {fmt} is CSV, not JSONL")
        rows, fmt = _jsonl_trace(path, text, fmt, trace_block_tokens)
    if not rows.arrival_s:
        raise ServecapError("arrival.path", str(path), "trace has no requests")
    arr = np.asarray(rows.arrival_s, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    lengths = np.asarray(rows.hash_lens, dtype=np.int64)
    hash_ids = np.zeros(0, dtype=np.int64)
    offsets = np.zeros(0, dtype=np.int64)
    if lengths.any():
        flat = np.frombuffer(rows.hash_ids, dtype=np.int64)
        sorted_lens = lengths[order]
        offsets = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(sorted_lens, out=offsets[1:])
        if np.all(order[1:] > order[:-1]):  # already in time order (the usual trace): no copy
            hash_ids = flat.copy()
        else:  # each row's ids moved with it: element k of sorted row j is file_start[j] + k
            file_start = np.zeros(len(lengths), dtype=np.int64)
            np.cumsum(lengths[:-1], out=file_start[1:])
            shift = np.repeat(file_start[order] - offsets[:-1], sorted_lens)
            hash_ids = flat[np.arange(int(offsets[-1]), dtype=np.int64) + shift]
    return ArrivalTrace(
        arr[order],
        np.asarray(rows.prompt, dtype=np.int64)[order],
        np.asarray(rows.output, dtype=np.int64)[order],
        np.asarray(rows.group, dtype=np.int64)[order],
        np.asarray(rows.ptok, dtype=np.int64)[order],
        hash_ids,
        offsets,
        trace_block_tokens,
        fmt,
        rows.skipped,
    )


def _copilot(path: Path) -> bool:
    from servecap.workload.copilot_trace import looks_like_copilot

    return looks_like_copilot(path)


# ---- CSV --------------------------------------------------------------------------------------


def _csv_trace(path: Path, text: str, fmt: str) -> tuple[_Rows, str]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        if fmt == "auto":
            fmt = _csv_format(header)
        where1 = f"{path.name}:1"
        if fmt == "servecap":
            _check_keys(header, where1)
        else:
            need = AZURE_COLUMNS if fmt == "azure" else BURSTGPT_COLUMNS
            for key in need:
                if key not in header:
                    raise ServecapError(
                        where1, key, f"missing column of a trace of format {fmt} (header: {', '.join(header)})"
                    )
        rows = _Rows()
        t0: float | None = None
        for i, row in enumerate(reader):
            line = i + 2
            if not any((v if isinstance(v, str) else "").strip() for v in row.values()):
                continue
            if None in row:
                raise ServecapError(f"{path.name}:{line}", str(row[None])[:60], "more fields than the header names")
            where = f"{path.name}:{line}"
            if fmt == "servecap":
                _servecap_row(rows, row, where)
            elif fmt == "azure":
                t = _azure_time(row.get("TIMESTAMP"), f"{where}.TIMESTAMP")
                t0 = t if t0 is None else t0
                prompt = int(_number(row, "ContextTokens", where, minimum=1, integer=True))
                output = int(_number(row, "GeneratedTokens", where, minimum=1, integer=True))
                rows.add(t - t0, prompt, output)
            else:
                t = _number(row, "Timestamp", where, minimum=0.0, maximum=MAX_TIME_S)
                prompt = int(_number(row, "Request tokens", where, minimum=0, integer=True))
                output = int(_number(row, "Response tokens", where, minimum=0, integer=True))
                if output == 0 or prompt == 0:
                    rows.skipped += 1  # BurstGPT marks a failed request with 0 response tokens
                    continue
                rows.add(t, prompt, output)
        if fmt == "azure" and rows.arrival_s:
            first = min(rows.arrival_s)  # rows may be unsorted: arrivals count from the earliest
            rows.arrival_s = [t - first for t in rows.arrival_s]
        return rows, fmt
    except csv.Error as err:
        raise ServecapError("arrival.path", str(path), f"malformed CSV: {err}") from None


def _csv_format(header: Sequence[str]) -> str:
    if all(c in header for c in AZURE_COLUMNS):
        return "azure"
    if all(c in header for c in BURSTGPT_COLUMNS):
        return "burstgpt"
    return "servecap"


_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)(Z|[+-]\d{2}:?\d{2})?$")


_EPOCH_DAYS = dt.date(2000, 1, 1).toordinal()


def _azure_time(raw: object, where: str) -> float:
    """Seconds since 2000-01-01 (kept small: float precision) of a ``YYYY-MM-DD HH:MM:SS[.fraction][offset]`` time (any number
    of fraction digits: the 2023 files print seven)."""
    m = _TIME.match(raw.strip()) if isinstance(raw, str) else None
    if m is None:
        raise ServecapError(where, raw, "not a date and time like 2023-11-16 18:17:03.9799600")
    y, mo, d, h, mi = (int(m.group(k)) for k in range(1, 6))
    try:
        days = dt.date(y, mo, d).toordinal() - _EPOCH_DAYS
    except ValueError as err:
        raise ServecapError(where, raw, f"not a valid date ({err})") from None
    sec = float(m.group(6))
    if h > 23 or mi > 59 or sec >= 61:
        raise ServecapError(where, raw, "not a valid time of day")
    t = days * 86400.0 + h * 3600 + mi * 60 + sec
    tz = m.group(7)
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        t -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return t


# ---- JSONL ------------------------------------------------------------------------------------


def _jsonl_trace(path: Path, whole: str, fmt: str, block_tokens: int) -> tuple[_Rows, str]:
    rows = _Rows()
    # one line at a time, no list of them (universal newlines: \n, \r\n or \r end a line)
    for i, line in enumerate(io.StringIO(whole, newline=None), start=1):
        text = line.rstrip("\n")
        if not text.strip():
            continue
        where = f"{path.name}:{i}"
        obj = json_line_object(text, where)
        if fmt == "auto" and is_sessions_file(obj):
            raise ServecapError(
                "arrival.format",
                "auto",
                f"{path.name} is a sessions trace (request_id, parent_id): give format sessions",
            )
        if fmt == "auto":
            fmt = "mooncake" if ("hash_ids" in obj and "timestamp" in obj) or "input_length" in obj else "servecap"
        if fmt == "servecap":
            _check_keys(list(obj), where, _JSONL_OPTIONAL)
            _servecap_row(rows, obj, where, block_tokens)
        else:
            t, prompt, output, hashes = mooncake_row(obj, where, block_tokens)
            rows.add(t, prompt, output, hashes=hashes)
    return rows, "servecap" if fmt == "auto" else fmt


def json_line_object(text: str, where: str) -> dict[str, Any]:
    """One JSONL line as the JSON object it must be; errors name ``where`` (file:line)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ServecapError(where, text[:60], f"not JSON ({str(err)[:80]})") from None
    if not isinstance(obj, dict):
        raise ServecapError(where, text[:60], "each line must be a JSON object")
    return obj


def mooncake_row(obj: dict[str, Any], where: str, block_tokens: int) -> tuple[float, int, int, list[int]]:
    """One Mooncake/Bailian line: arrival (s), prompt tokens, output tokens (a prefill-only row
    makes its first token: at least 1) and its block hashes; errors name ``where``."""
    for key in MOONCAKE_KEYS:
        if key not in obj:
            raise ServecapError(where, key, "missing key of a mooncake trace line")
    t = _number(obj, "timestamp", where, minimum=0.0, maximum=MAX_TIME_S * 1000.0) / 1000.0
    prompt = int(_number(obj, "input_length", where, minimum=1, integer=True))
    output = int(_number(obj, "output_length", where, minimum=0, integer=True))
    return t, prompt, max(output, 1), _hash_ids(obj.get("hash_ids"), prompt, block_tokens, where)


def _hash_ids(raw: object, prompt: int, block_tokens: int, where: str) -> list[int]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ServecapError(f"{where}.hash_ids", str(raw)[:60], "must be a list of non-negative integers")
    most = -(-prompt // block_tokens)
    if len(raw) > min(most, MAX_HASH_IDS):
        raise ServecapError(
            f"{where}.hash_ids",
            f"{len(raw)} ids",
            f"more than ceil({prompt} prompt tokens / {block_tokens} tokens per id) = {most}: "
            "is the trace's block size (trace_block_tokens) right?",
        )
    for x in raw:
        if type(x) is not int or x < 0 or x >= 1 << 63:
            raise ServecapError(f"{where}.hash_ids", str(x)[:60], "must be a list of non-negative 64-bit integers")
    return raw


def _servecap_row(rows: _Rows, row: dict[str, Any], where: str, block_tokens: int = DEFAULT_TRACE_BLOCK_TOKENS) -> None:
    t = _number(row, "arrival_s", where, minimum=0.0, maximum=MAX_TIME_S)
    prompt = int(_number(row, "prompt_tokens", where, minimum=1, integer=True))
    output = int(_number(row, "output_tokens", where, minimum=1, integer=True))
    group, ptok = -1, 0
    if row.get("prefix_group") not in (None, ""):
        group = int(_number(row, "prefix_group", where, minimum=0, integer=True))
        ptok = int(_number(row, "prefix_tokens", where, minimum=0, integer=True))
        if ptok > prompt:
            raise ServecapError(f"{where}.prefix_tokens", ptok, f"exceeds prompt_tokens {prompt}")
    elif row.get("prefix_tokens") not in (None, "", 0, "0"):  # a prefix belongs to a group: not ignored
        raise ServecapError(f"{where}.prefix_tokens", row["prefix_tokens"], "needs prefix_group (the prefix's group)")
    hashes = _hash_ids(row.get("hash_ids"), prompt, block_tokens, where)
    rows.add(t, prompt, output, group, ptok, hashes)


def _check_keys(keys: Sequence[str], where: str, optional: Sequence[str] = OPTIONAL) -> None:
    from servecap.errors import did_you_mean

    allowed = REQUIRED + tuple(optional)
    for key in keys:
        if key not in allowed:
            raise ServecapError(
                where, key, "unknown column" + did_you_mean(key, allowed) + f"; allowed: {', '.join(allowed)}"
            )
    for key in REQUIRED:
        if key not in keys:
            raise ServecapError(where, key, "missing required column")


MAX_TIME_S = 1e9  # a trace's clock: about 32 years of seconds (ms timestamps: 1e12)


def _number(
    row: dict[str, Any], key: str, where: str, *, minimum: float, integer: bool = False, maximum: float = 2.0**53
) -> float:
    raw = row.get(key)
    if isinstance(raw, bool):
        raise ServecapError(f"{where}.{key}", raw, "not a number")
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ServecapError(f"{where}.{key}", raw, "not a number") from None
    if not math.isfinite(value) or value < minimum or value > maximum:
        raise ServecapError(f"{where}.{key}", raw, f"must be a finite number within {minimum:g}..{maximum:g}")
    if integer and (value != int(value) or value >= 2**53):
        raise ServecapError(f"{where}.{key}", raw, "must be an integer below 2**53")
    return value
