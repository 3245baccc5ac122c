"""Agentic session traces: requests with parent/child edges and tool-call gaps.

Format ``sessions`` (JSONL, one request a line, in an order where every parent comes before its
children), the shape of the dependency graphs inference-perf compiles from agent traces
(kubernetes-sigs/inference-perf ``docs/weka_trace_replay.md``: sub-agent and tool edges):

- ``request_id`` (string or integer, unique) and ``session_id`` (string or integer);
- ``parent_id``: absent or null for a session's first request, else the id of the request (or a
  list of ids: a join after parallel sub-agents) it waits for;
- ``arrival_s``: a root's arrival (seconds from the trace's start; roots only);
- ``delay_s``: a child's gap after the last of its parents ends (the tool call, or the user's
  think time; 0 by default; children only);
- ``prompt_tokens``, ``output_tokens``, and optionally ``hash_ids`` (block hashes, as Mooncake's).

A child is issued when its last parent ends (or is refused) plus ``delay_s``: the replay is
closed loop, so a slower server delays the session as it would a real agent.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servecap.errors import ServecapError
from servecap.files import MAX_DATA_BYTES, first_text_line, read_text
from servecap.workload.block_hash import HashBlocks

KEYS = ("session_id", "request_id", "parent_id", "arrival_s", "delay_s", "prompt_tokens", "output_tokens", "hash_ids")
MAX_DELAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class SessionGraph:
    """Rows in file order; ``parents[i]`` are row indices (empty for a root)."""

    session: tuple[str, ...]
    parents: tuple[tuple[int, ...], ...]
    arrival_s: tuple[float, ...]  # roots' arrivals (children: 0.0)
    delay_s: tuple[float, ...]  # children's gaps (roots: 0.0)
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    hashes: tuple[HashBlocks | None, ...]

    def __len__(self) -> int:
        return len(self.parents)

    def children(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.parents]
        for i, ps in enumerate(self.parents):
            for p in ps:
                out[p].append(i)
        return out

    def scaled(self, time_scale: float, start_s: float = 0.0, end_s: float | None = None) -> SessionGraph:
        """Sessions whose root arrives in ``[start_s, end_s)``, shifted to 0, times (arrivals and
        gaps) multiplied by ``time_scale``; a session is kept or dropped whole."""
        keep_session = {
            self.session[i]
            for i in range(len(self))
            if not self.parents[i] and self.arrival_s[i] >= start_s and (end_s is None or self.arrival_s[i] < end_s)
        }
        rows = [i for i in range(len(self)) if self.session[i] in keep_session]
        new = {old: k for k, old in enumerate(rows)}
        if any(p not in new for i in rows for p in self.parents[i]):
            raise ServecapError("trace", "sessions", "a request's parent is in another session outside the window")
        return SessionGraph(
            tuple(self.session[i] for i in rows),
            tuple(tuple(new[p] for p in self.parents[i]) for i in rows),
            tuple((self.arrival_s[i] - start_s) * time_scale if not self.parents[i] else 0.0 for i in rows),
            tuple(self.delay_s[i] * time_scale for i in rows),
            tuple(self.prompt_tokens[i] for i in rows),
            tuple(self.output_tokens[i] for i in rows),
            tuple(self.hashes[i] for i in rows),
        )


def is_sessions_file(first: dict[str, Any]) -> bool:
    return "request_id" in first and ("parent_id" in first or "session_id" in first)


def starts_as_sessions(path: Path) -> bool:
    """Whether the file's first non-blank line is a sessions trace's JSON object (how ``format:
    auto`` tells a sessions trace from the open-loop formats); False for anything unreadable,
    which the open-loop readers then name."""
    line = first_text_line(path)
    if line is None:
        return False
    try:
        first = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(first, dict) and is_sessions_file(first)


def load_sessions(path: Path, *, trace_block_tokens: int = 512) -> SessionGraph:
    """Read and check a sessions trace; errors name the file, line and key."""
    text = read_text(path, "arrival.path", max_bytes=MAX_DATA_BYTES)
    index: dict[str, int] = {}
    session: list[str] = []
    parents: list[tuple[int, ...]] = []
    arrival: list[float] = []
    delay: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    hashes: list[HashBlocks | None] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as err:
            raise ServecapError(where, line[:60], f"not JSON ({str(err)[:80]})") from None
        if not isinstance(obj, dict):
            raise ServecapError(where, line[:60], "each line must be a JSON object")
        for key in obj:
            if key not in KEYS:
                from servecap.errors import did_you_mean

                raise ServecapError(
                    where, key, "unknown key" + did_you_mean(key, KEYS) + f"; allowed: {', '.join(KEYS)}"
                )
        rid = _name(obj.get("request_id"), f"{where}.request_id")
        if rid in index:
            raise ServecapError(f"{where}.request_id", rid, "repeats an earlier request's id")
        raw_parents = obj.get("parent_id")
        names = [] if raw_parents is None else raw_parents if isinstance(raw_parents, list) else [raw_parents]
        ps = []
        for p in names:
            pname = _name(p, f"{where}.parent_id")
            if pname not in index:
                raise ServecapError(f"{where}.parent_id", pname, "no earlier request has this id (parents come first)")
            ps.append(index[pname])
        is_root = not ps
        if is_root and "arrival_s" not in obj:
            raise ServecapError(where, "arrival_s", "a request without a parent needs its arrival_s")
        if not is_root and "arrival_s" in obj:
            raise ServecapError(
                f"{where}.arrival_s", obj["arrival_s"], "a child arrives delay_s after its parents: drop it"
            )
        if is_root and "delay_s" in obj:
            raise ServecapError(f"{where}.delay_s", obj["delay_s"], "a root has no parent to wait for: give arrival_s")
        index[rid] = len(parents)
        if "session_id" in obj:
            sid = _name(obj["session_id"], f"{where}.session_id")
        else:
            sid = rid if is_root else session[ps[0]]
        session.append(sid)
        parents.append(tuple(ps))
        arrival.append(_num(obj.get("arrival_s", 0.0), f"{where}.arrival_s", 0.0, 1e9))
        delay.append(_num(obj.get("delay_s", 0.0), f"{where}.delay_s", 0.0, MAX_DELAY_S))
        p_tok = int(_num(obj.get("prompt_tokens"), f"{where}.prompt_tokens", 1, 2**53, integer=True))
        prompt.append(p_tok)
        output.append(int(_num(obj.get("output_tokens"), f"{where}.output_tokens", 1, 2**53, integer=True)))
        ids = obj.get("hash_ids")
        if ids is None:
            hashes.append(None)
        else:
            if not isinstance(ids, list) or any(type(x) is not int or x < 0 or x >= 1 << 63 for x in ids):
                raise ServecapError(
                    f"{where}.hash_ids", str(ids)[:60], "must be a list of non-negative 64-bit integers"
                )
            if len(ids) > -(-p_tok // trace_block_tokens):
                raise ServecapError(
                    f"{where}.hash_ids", f"{len(ids)} ids", f"more than one per {trace_block_tokens} prompt tokens"
                )
            hashes.append(HashBlocks(tuple(ids), trace_block_tokens) if ids else None)
    if not parents:
        raise ServecapError("arrival.path", str(path), "trace has no requests")
    return SessionGraph(
        tuple(session), tuple(parents), tuple(arrival), tuple(delay), tuple(prompt), tuple(output), tuple(hashes)
    )


def _name(raw: object, where: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int) or (isinstance(raw, str) and not 0 < len(raw) <= 200):
        raise ServecapError(where, raw, "must be a string (1..200 characters) or an integer")
    return str(raw)


def _num(raw: object, where: str, lo: float, hi: float, *, integer: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ServecapError(where, raw, "not a number")
    v = float(raw)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ServecapError(where, raw, f"must be a finite number within {lo:g}..{hi:g}")
    if integer and v != int(v):
        raise ServecapError(where, raw, "must be an integer")
    return v
