"""GitHub Copilot coding-agent traces 2026 (Azure/AzurePublicDataset,
``GitHubCopilotCodingAgentDataset2026.md`` and ``analysis/GitHubCopilotCodingAgents/schema.json``;
Liu et al., "Agentic Coding in the Wild: Characterizing GitHub Copilot Traces at Production
Scale", arXiv:2608.00101; CC-BY): format ``copilot`` of :func:`servecap.workload.trace.load_trace`.

The documented schema: one JSON object per line, one agentic *session* each, with ``session_id``,
``date`` and ``turns``; a turn has ``llm_calls`` and ``tool_batches``; an LLM call has
``timestamp`` (an ISO-8601 date and time), ``duration_ms``, ``model`` (anonymised),
``tokens: {total, prompt, completion, cached, cached_pct}`` and ``message_metadata`` (segment
types and token counts, no text). The release ships gzip-compressed shards
(``date=2026-06-01/shard-0000.jsonl.gz``): ``zcat`` them into one ``.jsonl`` to replay.

What servecap replays: every LLM call is a request arriving at its ``timestamp`` (seconds after
the file's earliest call; a time without an offset is read as UTC, the dataset's partition
clock), with ``tokens.prompt`` prompt tokens and ``tokens.completion`` output tokens (0, a call
that made no token, is replayed as the one first token every request makes). The trace has no
text and no block hashes; its ``tokens.cached`` is the prompt tokens the provider served from its
prefix cache. servecap's mapping (ours, not the dataset's): each session keeps the block ids of
its last call's prompt, one id per ``trace_block_tokens`` tokens; a call's first
``floor(cached / block)`` blocks are the session's (the context an agent resends), the rest new
ids, so a replay's prefix-cache hits follow the recorded cached tokens where the cache still holds
the session's blocks. By hand, block 512: a call of 1,500 prompt tokens with 0 cached gets ids
``[0, 1, 2]``; the session's next call of 2,100 tokens with 1,100 cached gets ``[0, 1, 3, 4, 5]``
(2 blocks of its 1,100 cached tokens shared, ceil(2,100 / 512) = 5 blocks in all).
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from servecap.errors import ServecapError
from servecap.files import MAX_DATA_BYTES, first_text_line, read_text
from servecap.workload.arrival_trace import ArrivalTrace

MAX_CALLS = 10_000_000  # LLM calls in one file (the week's release: 9.3 M)


def is_copilot_line(obj: object) -> bool:
    """A line of the Copilot agent traces: a session with its ``turns``."""
    return isinstance(obj, dict) and "turns" in obj and "session_id" in obj


def looks_like_copilot(path: Path) -> bool:
    """The first non-empty line of a JSONL file is a Copilot session (read alone, no whole file)."""
    line = first_text_line(path, max_lines=100)  # None: the reader names an unreadable file
    if line is None:
        return False
    try:
        return is_copilot_line(json.loads(line))
    except (ValueError, RecursionError):  # the reader of the format names the line
        return False


def _time(raw: object, where: str) -> dt.datetime:
    if not isinstance(raw, str) or not raw.strip():
        raise ServecapError(f"{where}.timestamp", raw, "must be an ISO-8601 date and time")
    try:
        t = dt.datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ServecapError(f"{where}.timestamp", raw[:60], "not an ISO-8601 date and time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t


def _tokens(call: dict[str, Any], key: str, where: str, minimum: int) -> int:
    tokens = call.get("tokens")
    if not isinstance(tokens, dict):
        raise ServecapError(f"{where}.tokens", str(tokens)[:60], "must be an object with prompt, completion, cached")
    v = tokens.get(key)
    if type(v) is not int or v < minimum or v > 1 << 31:
        raise ServecapError(f"{where}.tokens.{key}", v, f"must be an integer >= {minimum}")
    return v


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    v = obj.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ServecapError(f"{where}.{key}", str(v)[:60], "must be a list")
    return v


def load_copilot_trace(path: Path, *, trace_block_tokens: int = 512) -> ArrivalTrace:
    """The calls of a Copilot agent-trace file as an :class:`ArrivalTrace`, sorted by time; every
    error names the file, line and key."""
    block = trace_block_tokens
    text = read_text(path, "arrival.path", max_bytes=MAX_DATA_BYTES)
    times: list[dt.datetime] = []
    prompts: list[int] = []
    outputs: list[int] = []
    ids: list[list[int]] = []
    next_id = 0
    for n, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as err:
            raise ServecapError(where, line[:60], f"not JSON ({str(err)[:80]})") from None
        if not is_copilot_line(obj):
            raise ServecapError(where, line[:60], "not a Copilot agent session (session_id, turns)")
        chain: list[int] = []  # the session's last prompt's blocks
        for ti, turn in enumerate(_list(obj, "turns", where)):
            if not isinstance(turn, dict):
                raise ServecapError(f"{where}.turns[{ti}]", str(turn)[:60], "must be an object")
            for ci, call in enumerate(_list(turn, "llm_calls", f"{where}.turns[{ti}]")):
                at = f"{where}.turns[{ti}].llm_calls[{ci}]"
                if not isinstance(call, dict):
                    raise ServecapError(at, str(call)[:60], "must be an object")
                prompt = _tokens(call, "prompt", at, 1)
                output = _tokens(call, "completion", at, 0)
                cached = _tokens(call, "cached", at, 0)
                if cached > prompt:
                    raise ServecapError(f"{at}.tokens.cached", cached, f"more than its {prompt} prompt tokens")
                shared = min(cached // block, len(chain))
                total = -(-prompt // block)
                fresh = list(range(next_id, next_id + total - shared))
                next_id += total - shared
                chain = chain[:shared] + fresh
                times.append(_time(call.get("timestamp"), at))
                prompts.append(prompt)
                outputs.append(max(1, output))
                ids.append(chain)
                if len(times) > MAX_CALLS:
                    raise ServecapError(where, len(times), f"more than {MAX_CALLS:,} LLM calls in one file")
    if not times:
        raise ServecapError("arrival.path", str(path), "trace has no LLM calls")
    first = min(times)  # seconds after it, exactly (an epoch float would lose the microseconds)
    t = np.asarray([(x - first).total_seconds() for x in times], dtype=np.float64)
    order = np.argsort(t, kind="stable")
    lengths = np.asarray([len(x) for x in ids], dtype=np.int64)[order]
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((h for i in order.tolist() for h in ids[i]), dtype=np.int64, count=int(offsets[-1]))
    n_calls = len(order)
    return ArrivalTrace(
        arrival_s=t[order],
        prompt_tokens=np.asarray(prompts, dtype=np.int64)[order],
        output_tokens=np.asarray(outputs, dtype=np.int64)[order],
        prefix_group=np.full(n_calls, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n_calls, dtype=np.int64),
        hash_ids=flat,
        hash_offsets=offsets,
        trace_block_tokens=block,
        format="copilot",
    )
