"""A block-hash trace read chunk by chunk: memory bounded by the chunk, not by the file.

:func:`~servecap.workload.trace.load_trace` reads a trace whole (it sorts the rows by time, and
caps the file at ``MAX_DATA_BYTES``); a month of a production block-hash trace is millions of
lines. :func:`iter_trace_chunks` reads a ``mooncake`` JSONL trace (the Mooncake FAST'25 and
Qwen Bailian keys: ``timestamp`` in ms, ``input_length``, ``output_length``, ``hash_ids``; other
keys ignored) one line at a time with the same checks per line as ``load_trace`` (same field
names in its errors: file, line, key) and yields :class:`~servecap.workload.RequestArrays` of
``chunk_rows`` rows. It cannot sort: a row earlier than the one before it is refused by line
(``load_trace`` reads and sorts a file that fits in memory). No size cap: the reader holds one
chunk, and the consumer (:func:`servecap.fleet.cache_replay_run.cache_replay`) one more.
"""

from __future__ import annotations

import json
import stat
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from servecap.errors import ServecapError
from servecap.workload.arrays import RequestArrays
from servecap.workload.block_hash import DEFAULT_TRACE_BLOCK_TOKENS
from servecap.workload.trace import MAX_HASH_IDS, MAX_TIME_S, json_line_object, mooncake_row

CHUNK_ROWS = 65_536


def iter_trace_chunks(
    path: Path,
    *,
    trace_block_tokens: int = DEFAULT_TRACE_BLOCK_TOKENS,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[RequestArrays]:
    """The ``mooncake`` trace at ``path`` as chunks of ``chunk_rows`` requests, in file order
    (which must be time order); errors name the file, the line and the key."""
    if chunk_rows < 1:
        raise ServecapError("chunk_rows", chunk_rows, "must be >= 1")
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise ServecapError("trace", str(path), "a streamed block-hash trace is mooncake JSONL (.jsonl)")
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would wait for a writer, a device never end
            raise ServecapError("trace", str(path), "is not a regular file")
        fh = path.open(encoding="utf-8", newline=None)
    except OSError as err:
        raise ServecapError("trace", str(path), f"cannot be read ({err.strerror or err})") from None
    rows = 0
    with fh:
        arrival: list[float] = []
        prompt: list[int] = []
        output: list[int] = []
        ids = array("q")
        lens: list[int] = []
        last_s = 0.0
        try:
            for i, line in enumerate(fh, start=1):
                text = line.strip()
                if not text:
                    continue
                # json.loads without its wrapper (the line is stripped); anything unusual, from
                # trailing text to a failed check, is read again by the whole checks below
                try:
                    obj, end = _scan(text, 0)
                except (StopIteration, ValueError, RecursionError):
                    obj, end = None, -1
                row = _plain_row(obj, trace_block_tokens) if type(obj) is dict and end == len(text) else None
                if row is None:  # not the plain shape: the whole checks, and their errors
                    where = f"{path.name}:{i}"
                    obj = json_line_object(text, where)
                    row = mooncake_row(obj, where, trace_block_tokens)
                t, p, o, h = row
                if t < last_s:
                    where = f"{path.name}:{i}"
                    raise ServecapError(
                        f"{where}.timestamp",
                        obj["timestamp"],
                        f"earlier than the line before ({last_s * 1000.0:g} ms): a streamed trace must be in "
                        "time order (sort it, or read it whole)",
                    )
                last_s = t
                arrival.append(t)
                prompt.append(p)
                output.append(o)
                ids.extend(h)
                lens.append(len(h))
                if len(arrival) == chunk_rows:
                    rows += len(arrival)
                    yield _chunk(arrival, prompt, output, ids, lens, trace_block_tokens)
                    arrival, prompt, output, ids, lens = [], [], [], array("q"), []
        except UnicodeDecodeError as err:
            raise ServecapError("trace", str(path), f"not UTF-8 text ({err.reason})") from None
        if arrival:
            rows += len(arrival)
            yield _chunk(arrival, prompt, output, ids, lens, trace_block_tokens)
    if rows == 0:
        raise ServecapError("trace", str(path), "trace has no requests")


# what json.loads runs, without its wrapper (typeshed leaves the scanner out)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_TIMESTAMP_MS_MAX = MAX_TIME_S * 1000.0
_INTEGER_MAX = 2**53
_HASH_MAX = 1 << 63
_INT_ONLY = frozenset((int,))


def _plain_row(obj: dict[str, Any], block_tokens: int) -> tuple[float, int, int, list[int]] | None:
    """:func:`~servecap.workload.trace.mooncake_row` of a line in the plain shape (integer lengths
    and ids in range, a finite timestamp in range), the same values; None: any other line (the
    caller runs the whole checks, which name what is wrong)."""
    get = obj.get
    ts: Any = get("timestamp")
    prompt: Any = get("input_length")
    output: Any = get("output_length")
    raw: Any = get("hash_ids")
    tt = type(ts)
    if (
        (tt is not int and tt is not float)
        or not 0.0 <= ts <= _TIMESTAMP_MS_MAX
        or type(prompt) is not int
        or not 1 <= prompt < _INTEGER_MAX
        or type(output) is not int
        or not 0 <= output < _INTEGER_MAX
    ):
        return None
    if raw is None:
        ids: list[int] = []
    elif type(raw) is list:
        if len(raw) > min(-(-prompt // block_tokens), MAX_HASH_IDS):
            return None
        if raw and not (_INT_ONLY.issuperset(map(type, raw)) and min(raw) >= 0 and max(raw) < _HASH_MAX):
            return None
        ids = raw
    else:
        return None
    return float(ts) / 1000.0, prompt, output if output > 1 else 1, ids


def _chunk(
    arrival: list[float], prompt: list[int], output: list[int], ids: array[int], lens: list[int], block_tokens: int
) -> RequestArrays:
    n = len(arrival)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.asarray(lens, dtype=np.int64), out=offsets[1:])
    has = bool(offsets[-1])
    return RequestArrays(
        arrival_s=np.asarray(arrival, dtype=np.float64),
        prompt_tokens=np.asarray(prompt, dtype=np.int64),
        output_tokens=np.asarray(output, dtype=np.int64),
        prefix_group=np.full(n, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n, dtype=np.int64),
        hash_ids=np.frombuffer(ids, dtype=np.int64).copy() if has else np.zeros(0, dtype=np.int64),
        hash_offsets=offsets if has else np.zeros(0, dtype=np.int64),
        trace_block_tokens=block_tokens,
    )
