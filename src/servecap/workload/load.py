"""Reading workload files (YAML or JSON) and building workloads from CLI flags.

Every problem becomes one :class:`ServecapError` naming the field (``workload.arrival.rate_per_s``)
and the value, with "did you mean" for misspelt keys.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servecap.errors import ServecapError, did_you_mean, from_validation_error
from servecap.files import MAX_DATA_BYTES, load_document, parse_document, read_text
from servecap.workload.spec import WorkloadSpec

ARRIVAL_KINDS = ("constant", "poisson", "gamma", "diurnal")


def load_workload(path: Path | str) -> WorkloadSpec:
    """Read ``path`` (``.yaml``/``.yml``/``.json``); relative file paths inside it (a trace, an
    empirical distribution) are resolved against the file's folder, and empirical files are
    read into ``values``."""
    path = Path(path)
    raw: Any = load_document(path, "workload")
    raw = _resolve_files(raw, path.parent)
    return workload_from_dict(raw)


def workload_from_dict(raw: dict[str, Any]) -> WorkloadSpec:
    """Validate a mapping; the first problem becomes a ServecapError naming the field."""
    try:
        return WorkloadSpec.model_validate(raw)
    except ValidationError as err:
        raise _to_error(err, raw) from None


def workload_from_flags(
    *,
    rate: float | None = None,
    prompt_tokens: int | float = 1024,
    output_tokens: int | float = 128,
    num_requests: int | None = None,
    duration_s: float | None = None,
    arrival: str = "poisson",
    cv: float | None = None,
    users: int | None = None,
    think_time_s: float | None = None,
    prompt_sigma: float | None = None,
    output_sigma: float | None = None,
) -> WorkloadSpec:
    """The common cases from flags: an open loop at ``rate`` (``arrival`` one of constant,
    poisson, gamma with ``cv``) or ``users`` closed-loop users thinking ``think_time_s``; fixed
    lengths, or log-normal with the given median and ``*_sigma``; think times exponential with
    mean ``think_time_s`` (default 30 s). With neither stop condition,
    ``num_requests`` defaults to 1000 (stated in the CLI's notes)."""
    if num_requests is None and duration_s is None:
        num_requests = 1000
    raw: dict[str, Any] = {"num_requests": num_requests, "duration_s": duration_s}
    raw["prompt_tokens"] = _length(prompt_tokens, prompt_sigma)
    raw["output_tokens"] = _length(output_tokens, output_sigma)
    if users is not None:
        if rate is not None:
            raise ServecapError("rate", rate, "give --rate (open loop) or --users (closed loop), not both")
        think = 30.0 if think_time_s is None else think_time_s
        # exponential think times: fixed ones make users who finish together return together
        raw["users"] = {"count": users, "think_time_s": {"kind": "exponential", "mean": think} if think > 0 else 0.0}
    else:
        if rate is None:
            raise ServecapError("rate", None, "give --rate (requests/s), --users N, or --workload FILE")
        if arrival not in ARRIVAL_KINDS:
            raise ServecapError("arrival", arrival, "unknown arrival process" + did_you_mean(arrival, ARRIVAL_KINDS))
        _check_flag_sizes(rate, num_requests, duration_s)
        arr: dict[str, Any] = {"kind": arrival, "rate_per_s": rate}
        if cv is not None:
            if arrival != "gamma":
                raise ServecapError("cv", cv, "only the gamma arrival process takes a coefficient of variation")
            arr["cv"] = cv
        raw["arrival"] = arr
    return workload_from_dict({k: v for k, v in raw.items() if v is not None})


def _check_flag_sizes(rate: float, num_requests: int | None, duration_s: float | None) -> None:
    """The open loop's size from the flags, named by the flags (the file's check names fields)."""
    from servecap.workload.spec import MAX_DURATION_S, MAX_REQUESTS

    if not rate > 0:
        return  # the model's own check says what is wrong
    if num_requests is None and duration_s is not None and rate * duration_s > MAX_REQUESTS:
        raise ServecapError(
            "--rate x --duration-s",
            f"{rate:g} x {duration_s:g}",
            f"{rate * duration_s:.3g} requests, over the limit of {MAX_REQUESTS:,}: lower one, or give --num-requests",
        )
    if num_requests is not None and duration_s is None and num_requests / rate > MAX_DURATION_S:
        raise ServecapError(
            "--rate",
            rate,
            f"{num_requests:,} requests at this rate arrive over {num_requests / rate:.3g} s, more than a year "
            f"({MAX_DURATION_S:,.0f} s): raise --rate or give --duration-s",
        )


def _length(value: int | float, sigma: float | None) -> Any:
    if sigma is None or sigma == 0:
        return value
    return {"kind": "lognormal", "median": value, "sigma": sigma}


def _resolve_files(raw: Any, base: Path) -> Any:
    """Resolve relative paths; read empirical files into ``values``."""
    if isinstance(raw, list):
        return [_resolve_files(v, base) for v in raw]
    if not isinstance(raw, dict):
        return raw
    out = {k: _resolve_files(v, base) for k, v in raw.items()}
    kind = out.get("kind")
    if kind in ("trace", "empirical") and isinstance(out.get("path"), str) and not out["path"].startswith("sample:"):
        p = Path(out["path"])
        if not p.is_absolute():
            p = base / p
        out["path"] = str(p)
        if kind == "empirical" and out.get("values") is None:
            out["values"] = read_numbers(p, out.get("column"))
    return out


def read_numbers(path: Path, column: str | None = None) -> list[float]:
    """Numbers from a file: a JSON list, a CSV (``column`` or the first), or one per line."""
    text = read_text(path, "empirical.path", max_bytes=MAX_DATA_BYTES)
    values: list[float] = []
    try:
        if path.suffix.lower() == ".json":
            data = parse_document(text, "json", "empirical.path", str(path))
            if not isinstance(data, list):
                raise ServecapError("empirical.path", str(path), "a JSON file must hold a list of numbers")
            values = [float(v) for v in data]
        elif path.suffix.lower() == ".csv":
            reader = csv.DictReader(text.splitlines())
            names = reader.fieldnames or []
            col = column or (names[0] if names else None)
            if col is None or col not in names:
                raise ServecapError("empirical.column", column, f"not a column of {path.name} ({', '.join(names)})")
            values = [float(row[col]) for row in reader if (row.get(col) or "").strip()]
        else:
            values = [float(line) for line in text.split() if line.strip()]
    except (ValueError, TypeError) as err:
        raise ServecapError("empirical.path", str(path), f"not a file of numbers ({err})") from None
    if not values:
        raise ServecapError("empirical.path", str(path), "holds no numbers")
    return values


def _to_error(err: ValidationError, raw: dict[str, Any]) -> ServecapError:
    return from_validation_error(err, "workload", allowed_keys=lambda loc: _allowed_keys(raw, loc), skip=_TAGS)


_TAGS = {
    "fixed",
    "exponential",
    "uniform",
    "normal",
    "lognormal",
    "empirical",
    "mixture",
    "constant",
    "poisson",
    "gamma",
    "diurnal",
    "trace",
    "agentic",
    "schedule",
    "piecewise",
    "int",
    "float",
}


def _allowed_keys(raw: dict[str, Any], loc: list[str]) -> list[str]:
    from servecap.workload import mix_spec as m
    from servecap.workload import schedule_spec as sc
    from servecap.workload import spec as s
    from servecap.workload.agentic_spec import AgenticArrival

    node: Any = raw
    for p in loc:
        if isinstance(node, dict):
            node = node.get(p)
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
    model: Any = s.WorkloadSpec
    if loc:
        kind = node.get("kind") if isinstance(node, dict) else None
        inside_rate = len(loc) >= 2 and loc[-2] == "arrival" and loc[-1] == "rate"
        by_kind = {
            "fixed": s.FixedDist,
            "exponential": s.ExponentialDist,
            "uniform": s.UniformDist,
            "normal": s.NormalDist,
            "lognormal": s.LogNormalDist,
            "empirical": s.EmpiricalDist,
            "mixture": s.MixtureDist,
            "constant": sc.ConstantRate if inside_rate else s.ConstantArrival,
            "poisson": s.PoissonArrival,
            "gamma": s.GammaArrival,
            "diurnal": sc.DiurnalRate if inside_rate else s.DiurnalArrival,
            "trace": s.TraceArrival,
            "agentic": AgenticArrival,
            "schedule": sc.ScheduleArrival,
            "piecewise": sc.PiecewiseRate,
        }
        by_name = {
            "users": s.UsersSpec,
            "prefix": s.PrefixSpec,
            "slo": m.SloSpec,
            "repeats": m.RepeatSpec,
            "sessions": m.SessionsSpec,
        }
        by_list = {"tenants": m.TenantSpec, "classes": m.ClassSpec, "spikes": sc.Spike, "steps": sc.RateStep}
        if kind in by_kind:
            model = by_kind[kind]
        elif loc[-1] in by_name:
            model = by_name[loc[-1]]
        elif loc[-1].isdigit() and len(loc) >= 2 and loc[-2] in by_list:
            model = by_list[loc[-2]]
        elif loc[-1].isdigit():
            model = s.MixtureComponent
        else:
            return []
    names = []
    for name, f in model.model_fields.items():
        names.append(f.alias or name)
    return names
