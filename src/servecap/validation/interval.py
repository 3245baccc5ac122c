"""An 80% interval on a prediction, from servecap's own errors on the corpus of published
measurements (docs/validation.md, "Intervals").

A prediction ``p`` of a value whose corpus residuals (``e = predicted / measured - 1``, the
training half's, ``residuals.json``) are ``e_1 .. e_n`` says the measured value lies in

    [p / (1 + e_(n+1-k)), p / (1 + e_(k))],   k = floor(0.1 x (n + 1)),

the distribution-free prediction interval of order statistics: for a new residual drawn from
the same distribution as the ``n``, ``P(e_(k) <= e <= e_(n+1-k)) = (n + 1 - 2k) / (n + 1)``,
at least 0.8 when ``k = floor(0.1 (n + 1))`` (H. A. David and H. N. Nagaraja, *Order
Statistics*, 3rd ed., 2003, section 7.2; Wilks 1941). It needs ``n >= 9`` (``k >= 1``).

The residuals come from the group most like the question, the first of

1. the same engine, GPU family and metric,
2. the same GPU family and metric (any engine),
3. the same engine and metric (any GPU),
4. the metric alone (everything the corpus has),

holding at least :data:`MIN_VALUES` values. A coarser group pools unlike rows and is wider; the
interval says which group it came from, and when it is not the first, that the corpus holds
nothing close to the question. Users, request rates and replica counts take the throughput
residuals (capacity scales with throughput); latencies their own metric's.

**The point is bias-corrected from the same residuals** (docs/validation.md, "The answer and
its interval"). When servecap errs one way on every value of a group (it under-predicts vLLM's
throughput on H100 by 2-11%: all ten residuals are negative), the raw model figure ``p`` lies
outside ``[low, high]``. The answer shown is therefore the median-corrected estimate

    estimate = p / (1 + median(e_1 .. e_n)),

the measured value the corpus's typical error points to. Since ``e_(k) <= median <=
e_(n+1-k)`` it always lies inside the interval. The raw figure stays in ``model`` (and in the
JSON's top-level keys, which are the model's arithmetic).

**Under a calibration file** the model was fitted to the user's own server, so the corpus's
errors (made with the default efficiencies) no longer describe it: :func:`calibrated_interval`
builds the interval from the fit's own step-time RMSE instead (a least-squares fit: no bias to
correct, the estimate is the point).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from servecap.errors import ServecapError
from servecap.specs.step_choice import model_class_of as model_class_of

LEVEL = 0.8
MIN_VALUES = 9
"""The fewest residuals an 80% order-statistic interval can be built from: ``k = floor(0.1 (n +
1)) >= 1`` needs ``n >= 9``."""

METRICS = ("throughput", "tpot", "ttft", "e2e")


@dataclass(frozen=True, slots=True)
class Residual:
    """One corpus value's error: ``predicted / measured - 1``."""

    engine: str
    gpu_family: str
    metric: str  # throughput, tpot, ttft, e2e
    split: str  # train or test
    error: float
    row: str = ""
    model_class: str = ""  # dense, moe<=100B, moe>100B (validation.evaluate.model_class)
    engine_version: str = ""  # the source's engine version, as printed


@dataclass(frozen=True, slots=True)
class Interval:
    """``low``..``high`` holds the measured value with probability ``level`` by the corpus's
    errors on ``basis``; ``close`` is False when the corpus has nothing like the question
    (no group with the engine and GPU family), and ``note`` says so in words."""

    low: float
    high: float
    level: float
    count: int
    basis: str
    close: bool
    note: str
    # the bias-corrected answer (always within low..high) and the raw model figure it corrects;
    # NaN when built by hand without them
    estimate: float = math.nan
    model: float = math.nan

    def to_dict(self) -> dict[str, object]:
        return {
            "estimate": self.estimate,
            "model": self.model,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "count": self.count,
            "basis": self.basis,
            "close": self.close,
            "note": self.note,
        }


def residuals_path() -> Path:
    return Path(str(resources.files("servecap.validation") / "residuals.json"))


def load_residuals(path: Path | None = None) -> tuple[Residual, ...]:
    """The residuals file ``benchmarks/write_residuals.py`` writes from ``servecap validate``."""
    p = path or residuals_path()
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ServecapError("residuals", str(p), "no such file") from None
    out = []
    for item in raw["residuals"]:
        out.append(
            Residual(
                engine=str(item["engine"]),
                gpu_family=str(item["gpu_family"]),
                metric=str(item["metric"]),
                split=str(item["split"]),
                error=float(item["error"]),
                row=str(item.get("row", "")),
                model_class=str(item.get("model_class", "")),
                engine_version=str(item.get("engine_version", "")),
            )
        )
    return tuple(out)


@lru_cache(maxsize=1)
def _shipped() -> tuple[Residual, ...]:
    return tuple(r for r in load_residuals() if r.split == "train")


def order_statistic_bounds(errors: list[float], level: float = LEVEL) -> tuple[float, float]:
    """The ``k``-th smallest and ``k``-th largest of ``errors``, ``k = floor((1 - level) / 2 x
    (n + 1))`` (at least ``level`` coverage of a new draw; see the module docstring)."""
    n = len(errors)
    k = int((1.0 - level) / 2.0 * (n + 1) + 1e-9)
    if k < 1:
        raise ServecapError("residuals", n, f"too few values for a {level:.0%} interval (need {MIN_VALUES})")
    s = sorted(errors)
    return s[k - 1], s[n - k]


def first_version(text: str) -> tuple[int, int] | None:
    """The first ``major.minor`` in a version as printed (``"0.26.0 (PyTorch ...)"`` -> (0, 26),
    ``"V1 engine (0.11 and later)"`` -> (0, 11)); None when none is printed."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _class_and_version_notes(
    pool: tuple[Residual, ...], engine: str, metric: str, model_class: str | None, engine_version: str | None
) -> list[str]:
    """What the corpus lacks of the question: values of its model class, and of its engine at the
    profile's version or later."""
    notes = []
    same = [r for r in pool if r.metric == metric]
    if model_class and same and all(r.model_class for r in same):
        if not any(r.model_class == model_class for r in same):
            notes.append(f"the corpus has no {metric} value of a {model_class} model: this answer's class is untested")
        elif sum(1 for r in same if r.model_class == model_class) < MIN_VALUES:
            n = sum(1 for r in same if r.model_class == model_class)
            notes.append(f"the corpus has {n} {metric} values of {model_class} models, too few to judge that class")
    if engine_version:
        want = first_version(engine_version)
        mine = [r for r in same if r.engine == engine and r.engine_version]
        have = sorted({v for r in mine if (v := first_version(r.engine_version)) is not None})
        if want is not None and not mine:
            notes.append(f"the corpus has no {engine} {metric} value at any version")
        elif want is not None and not any(v >= want for v in have):
            printed = ", ".join(f"{a}.{b}" for a, b in have) or "none printed"
            notes.append(
                f"the corpus has no {engine} {metric} value at version {want[0]}.{want[1]} or later "
                f"(its {engine} versions: {printed})"
            )
    return notes


def median(errors: list[float]) -> float:
    """The sample median (the mean of the two middle values for an even count)."""
    s = sorted(errors)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _group(residuals: tuple[Residual, ...], engine: str, gpu_family: str, metric: str) -> tuple[list[float], str, bool]:
    same_metric = [r for r in residuals if r.metric == metric]
    levels: list[tuple[list[Residual], str, bool]] = [
        (
            [r for r in same_metric if r.engine == engine and r.gpu_family == gpu_family],
            f"{engine} on {gpu_family}",
            True,
        ),
        ([r for r in same_metric if r.gpu_family == gpu_family], f"every engine on {gpu_family}", False),
        ([r for r in same_metric if r.engine == engine], f"{engine} on every GPU", False),
        (same_metric, "every engine and GPU", False),
    ]
    for rows, basis, close in levels:
        if len(rows) >= MIN_VALUES:
            return [r.error for r in rows], basis, close
    raise ServecapError("metric", metric, f"the corpus has fewer than {MIN_VALUES} {metric} values")


def interval(
    predicted: float,
    *,
    metric: str,
    engine: str,
    gpu_family: str,
    residuals: tuple[Residual, ...] | None = None,
    level: float = LEVEL,
    fallback_share: float = 0.0,
    model_class: str | None = None,
    engine_version: str | None = None,
) -> Interval:
    """The ``level`` interval of the measured value behind a prediction of ``metric``
    (throughput, tpot, ttft or e2e) for ``engine`` on ``gpu_family`` (the module docstring).

    ``fallback_share`` (the step-as-operations model, ``core.ops``): the share ``f`` of the
    step's time that no measured table covered. The residuals were the roofline's, which times
    every operation; the interval of such an answer keeps their spread for the roofline's part
    and widens it on its measured part too, since those tables are one GPU's kernels, not the
    deployment's: its log-width is scaled by ``1 + f`` about the prediction (no widening when
    every operation was measured, twice the log-width when none was).

    ``model_class`` (``model_class_of``) and ``engine_version`` (the engine profile's): the note
    says when the corpus has no value of the question's model class, or none of its engine at
    that version or later (``close`` is then False too)."""
    if metric not in METRICS:
        raise ServecapError("metric", metric, "must be one of " + ", ".join(METRICS))
    pool = residuals if residuals is not None else _shipped()
    errors, basis, close = _group(pool, engine, gpu_family, metric)
    lo_err, hi_err = order_statistic_bounds(errors, level)
    widen = 1.0 + min(1.0, max(0.0, fallback_share))
    low = predicted / (1.0 + hi_err) ** widen
    high = predicted / (1.0 + lo_err) ** widen
    mid = median(errors)
    estimate = min(high, max(low, predicted / (1.0 + mid)))  # the clamp only absorbs rounding
    label = f"{len(errors)} corpus {metric} values of {basis}"
    correction = f"; the answer is the model's {_g(predicted)} corrected by their median error {mid:+.1%}"
    if close:
        note = f"{level:.0%} interval from servecap's errors on {label}{correction}"
    else:
        note = (
            f"the corpus has too few {metric} values of {engine} on {gpu_family} to judge this answer; "
            f"{level:.0%} interval widened to servecap's errors on {label}{correction}"
        )
    lacking = _class_and_version_notes(pool, engine, metric, model_class, engine_version)
    if lacking:
        close = False
        note += "; " + "; ".join(lacking)
    if fallback_share > 0.0:
        note += (
            f"; {fallback_share:.0%} of the step's operation time from the roofline fallback (no measured "
            f"kernel table covers it): log-width x {widen:.2f}"
        )
    return Interval(low, high, level, len(errors), basis, close, note, estimate, predicted)


def _g(x: float) -> str:
    """A figure in a note: whole numbers with separators, small ones to three digits."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


Z_80 = 1.2815515655446004
"""The standard normal's 90th percentile: a two-sided 80% interval is ``mean +- 1.2816 sd``."""


def calibrated_interval(
    predicted: float,
    *,
    metric: str,
    relative_sd: float,
    samples: int,
    source: str,
    level: float = LEVEL,
) -> Interval:
    """The 80% interval of a prediction made with a calibration file's fitted coefficients.

    The fit is least squares on the user's own step times, so its residuals have mean zero and
    standard deviation ``rmse``; a step time ``t`` is off by ``+-z x rmse`` with 80% probability
    (``z = 1.2816``, normal errors assumed), a relative ``r = z x rmse / t``. A latency scales
    with the step time: ``[p (1 - r), p (1 + r)]``; a throughput (users, requests/s) with its
    inverse: ``[p / (1 + r), p / (1 - r)]``. The estimate is the point (no bias to correct).
    ``relative_sd`` is ``rmse / t`` at the plan's decode step; ``samples`` the step times
    fitted; ``source`` the file, for the note."""
    if metric not in METRICS:
        raise ServecapError("metric", metric, "must be one of " + ", ".join(METRICS))
    if level != LEVEL:
        raise ServecapError("level", level, f"only the {LEVEL:.0%} interval is built from a calibration")
    r = min(0.95, Z_80 * max(0.0, relative_sd))
    if metric == "throughput":
        low, high = predicted / (1.0 + r), predicted / (1.0 - r)
    else:
        low, high = predicted * (1.0 - r), predicted * (1.0 + r)
    note = (
        f"{level:.0%} interval from the calibration's fit ({source}: step-time RMSE {relative_sd:.1%} of the "
        f"decode step over {samples:,} steps, normal errors); the corpus's errors do not apply to a fitted model"
    )
    return Interval(low, high, level, samples, f"calibration {source}", True, note, predicted, predicted)


def intervals_for(
    values: dict[str, tuple[float, str]],
    *,
    engine: str,
    gpu_family: str,
    fallback_share: float = 0.0,
    model_class: str | None = None,
    engine_version: str | None = None,
) -> dict[str, Interval]:
    """:func:`interval` of each named prediction ``name -> (value, metric)``; values that are
    not positive (nothing served) get none."""
    return {
        name: interval(
            v,
            metric=metric,
            engine=engine,
            gpu_family=gpu_family,
            fallback_share=fallback_share,
            model_class=model_class,
            engine_version=engine_version,
        )
        for name, (v, metric) in values.items()
        if v > 0
    }


def coverage(residuals: tuple[Residual, ...], level: float = LEVEL) -> tuple[int, int]:
    """How many held-out values the interval built from the training values holds:
    (inside, total). A value is inside when its prediction's interval contains the measurement,
    i.e. when its own error lies between the group's order statistics."""
    train = tuple(r for r in residuals if r.split == "train")
    inside = total = 0
    for r in residuals:
        if r.split != "test":
            continue
        iv = interval(
            1.0 + r.error, metric=r.metric, engine=r.engine, gpu_family=r.gpu_family, residuals=train, level=level
        )
        total += 1
        if iv.low <= 1.0 <= iv.high:
            inside += 1
    return inside, total


def replica_interval(
    replicas: int,
    usd_per_month: float,
    *,
    engine: str,
    gpu_family: str,
    residuals: tuple[Residual, ...] | None = None,
    level: float = LEVEL,
) -> tuple[Interval, Interval]:
    """The ``level`` intervals of the replica count a fleet needs, and of its rent, when servecap
    says ``replicas`` (costing ``usd_per_month``) for ``engine`` on ``gpu_family``.

    The method: the replicas a fleet needs scale inversely with what one replica serves. The
    fleet plan sized ``n`` replicas on a predicted per-replica throughput ``c``; the throughput
    residuals' order statistics ``e_(k) .. e_(n+1-k)`` (:func:`interval`, the same group choice)
    put the measured throughput in ``[c / (1 + e_(n+1-k)), c / (1 + e_(k))]``, so the fleet that
    measured throughput needs is ``n x c / measured`` replicas, rounded up to whole ones:

        [ceil(n x (1 + e_(k))), ceil(n x (1 + e_(n+1-k)))]   (at least 1 replica).

    An over-predicting servecap (``e > 0``) needs more replicas than it said. The rent scales
    with the count: ``usd_per_month / n`` per replica, times each end. It is the throughput
    interval carried to the count, not a new simulation: it holds while the fleet's SLO-bound
    capacity errs as the corpus's peak throughputs do."""
    tput = interval(1.0, metric="throughput", engine=engine, gpu_family=gpu_family, residuals=residuals, level=level)
    # tput.low = 1 / (1 + e_hi), tput.high = 1 / (1 + e_lo): replicas needed = n / (measured / c)
    low = max(1, math.ceil(replicas / tput.high - 1e-9))
    high = max(1, math.ceil(replicas / tput.low - 1e-9))
    # the count the median error points to (tput.estimate = 1 / (1 + median)), inside low..high
    estimate = min(float(high), max(float(low), float(max(1, math.ceil(replicas / tput.estimate - 1e-9)))))
    per = usd_per_month / replicas if replicas else 0.0
    note = tput.note.replace(f"{level:.0%} interval", f"{level:.0%} interval of the replica count", 1)
    note = note.split("; the answer is")[0] + (
        f"; {estimate:.0f} replicas at the corpus's median error, {replicas} as simulated on servecap's model"
    )
    count = Interval(
        float(low), float(high), level, tput.count, tput.basis, tput.close, note, estimate, float(replicas)
    )
    cost = Interval(
        low * per,
        high * per,
        level,
        tput.count,
        tput.basis,
        tput.close,
        note.replace("replica count", "rent", 1),
        estimate * per,
        usd_per_month,
    )
    return count, cost
