"""``--trace`` and its flags, shared by ``simulate``, ``capacity`` and ``fleet simulate``: a trace
file (or a shipped ``sample:<name>``) replayed as the workload, with its format, window and time
scale (:class:`~servecap.workload.spec.TraceArrival` holds the ranges; a bad value is named by
its flag)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from servecap.errors import ServecapError
from servecap.workload.spec import TraceArrival

FLAGS = {
    "path": "--trace",
    "format": "--trace-format",
    "time_scale": "--time-scale",
    "start_s": "--trace-start-s",
    "end_s": "--trace-end-s",
    "trace_block_tokens": "--trace-block-tokens",
}


def trace_from_flags(
    trace: str | None,
    *,
    trace_format: str = "auto",
    time_scale: float | None = None,
    trace_start_s: float | None = None,
    trace_end_s: float | None = None,
    trace_block_tokens: int | None = None,
) -> TraceArrival | None:
    """The trace the flags name (None without ``--trace``); a window or scale flag without
    ``--trace`` is an error naming it."""
    given = {
        "format": None if trace_format == "auto" else trace_format,
        "time_scale": time_scale,
        "start_s": trace_start_s,
        "end_s": trace_end_s,
        "trace_block_tokens": trace_block_tokens,
    }
    if trace is None:
        for key, value in given.items():
            if value is not None:
                raise ServecapError(FLAGS[key], value, "needs --trace FILE (or --trace sample:<name>)")
        return None
    raw: dict[str, Any] = {"kind": "trace", "path": trace, **{k: v for k, v in given.items() if v is not None}}
    try:
        return TraceArrival.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = [str(p) for p in first["loc"]]
        key = loc[0] if loc else "end_s"  # the one check across fields: the window's end after its start
        flag = FLAGS.get(key, "--trace")
        value = raw.get(key)
        raise ServecapError(flag, value, first["msg"].removeprefix("Value error, ")) from None
