"""The quantile sketch (DDSketch) and the streaming summary: folded batches equal the package's
one-by-one adds, quantiles within the stated relative error of numpy's, merging pools values,
and the counters and SLO attainment equal ``summarize_columns``'s exactly."""

from __future__ import annotations

import numpy as np
import pytest
from ddsketch import DDSketch

from servecap.results import RecordColumns, summarize_columns
from servecap.results.sketch import QuantileSketch
from servecap.results.sketch_set import RunSketches
from servecap.results.stream import StreamingSummary
from servecap.specs.perf import Slo

ALPHA = 0.01
NAMES = ("", "rejected", "replica_failed")
QS = (0.5, 0.9, 0.95, 0.99, 0.999)


def _draws(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "lognormal":
        return rng.lognormal(-2.0, 1.3, n)
    if kind == "pareto":  # heavy tail
        return (rng.pareto(1.5, n) + 1.0) * 1e-3
    if kind == "bimodal":
        return np.where(rng.uniform(size=n) < 0.9, rng.normal(0.05, 0.005, n).clip(1e-4), rng.exponential(3.0, n))
    return rng.uniform(0.0, 2.0, n)  # with exact zeros below


def test_folded_batches_equal_the_packages_adds() -> None:
    rng = np.random.default_rng(0)
    x = rng.lognormal(-1.0, 2.0, 20_000)
    x[:30] = 0.0
    x[30:40] = -x[30:40]  # negatives go to the negative store
    w = rng.integers(1, 5, len(x))
    folded = QuantileSketch(ALPHA)
    for lo in range(0, len(x), 4096):
        folded.add_array(x[lo : lo + 4096], w[lo : lo + 4096])
    ref = DDSketch(ALPHA)
    for v, k in zip(x.tolist(), w.tolist(), strict=True):
        ref.add(v, float(k))
    for a, b in ((folded.sketch._store, ref._store), (folded.sketch._negative_store, ref._negative_store)):
        assert (a.min_key, a.max_key, a.count) == (b.min_key, b.max_key, b.count)
        assert all(a.bins[k - a.offset] == b.bins[k - b.offset] for k in range(a.min_key, a.max_key + 1)), (
            "bucket counts differ"
        )
    assert folded.sketch._zero_count == ref._zero_count
    assert folded.sketch.count == ref.count and folded.sketch.sum == pytest.approx(ref.sum)


@pytest.mark.parametrize("kind", ["lognormal", "pareto", "bimodal", "uniform"])
def test_quantiles_within_the_relative_error_of_numpys(kind: str) -> None:
    rng = np.random.default_rng(1)
    x = _draws(kind, 50_000, rng)
    s = QuantileSketch(ALPHA)
    s.add_array(x)
    for q in QS:
        exact = float(np.percentile(x, q * 100))
        got = s.quantile(q)
        assert got is not None
        assert abs(got - exact) <= ALPHA * abs(exact) + 1e-12, (kind, q, got, exact)
    p = s.percentiles()
    assert p.count == len(x) and p.max == x.max() and p.mean == pytest.approx(x.mean())


def test_merge_is_the_sketch_of_the_pooled_values_and_the_dict_round_trips() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(0, 1, 3000), rng.lognormal(1, 0.5, 5000)
    sa, sb, pooled = QuantileSketch(), QuantileSketch(), QuantileSketch()
    sa.add_array(a)
    sb.add_array(b)
    pooled.add_array(np.concatenate([a, b]))
    sa.merge(sb)
    assert [sa.quantile(q) for q in QS] == [pooled.quantile(q) for q in QS]
    back = QuantileSketch.from_dict(sa.to_dict())
    assert back.percentiles() == sa.percentiles()
    assert QuantileSketch().percentiles().count == 0 and QuantileSketch().quantile(0.5) is None


def _columns(rng: np.random.Generator, n: int) -> RecordColumns:
    arrival = np.sort(rng.uniform(0, 100, n))
    first = arrival + rng.lognormal(-2, 1, n)
    out = rng.integers(1, 300, n)
    end = first + out * rng.uniform(0.01, 0.06, n)
    err: list[str | None] = [None] * n
    for i in rng.choice(n, 40, replace=False).tolist():
        err[i] = "rejected" if i % 2 else "replica_failed"
        first[i] = end[i] = np.nan
    return RecordColumns(
        arrival,
        first,
        end,
        rng.integers(10, 900, n),
        out,
        rng.integers(0, 5, n),
        rng.integers(0, 2, n),
        rng.uniform(0, 0.2, n),
        tuple(err),
    )


def _batch(c: RecordColumns, idx: np.ndarray) -> RecordColumns:
    return c.take(idx)


def test_streaming_summary_equals_the_exact_one_on_counts_and_slo() -> None:
    rng = np.random.default_rng(3)
    c = _columns(rng, 20_000)
    slo = Slo(0.2, 0.04)
    exact = summarize_columns(c, duration_s=100.0, slo=slo)
    stream = StreamingSummary(slo)
    order = rng.permutation(len(c))  # finishing order is not id order
    for part in np.array_split(order, 7):
        stream.add(_batch(c, part))
    got = stream.summary(100.0)
    for key in ("num_requests", "completed", "rejected", "errors", "preemptions", "prompt_tokens"):
        assert getattr(got, key) == getattr(exact, key), key
    assert got.slo_attainment == exact.slo_attainment and got.goodput_req_s == pytest.approx(exact.goodput_req_s)
    assert got.output_tokens_per_s == pytest.approx(exact.output_tokens_per_s)
    for key in ("ttft_s", "tpot_s", "e2e_s", "queue_time_s"):
        g, e = getattr(got, key), getattr(exact, key)
        for q in ("p50", "p90", "p95", "p99"):
            assert abs(getattr(g, q) - getattr(e, q)) <= ALPHA * getattr(e, q), (key, q)
        assert g.max == e.max and g.count == e.count
    assert (got.percentile_method, got.relative_error) == ("sketch", ALPHA)
    assert exact.percentile_method == "exact"
    # two halves merged equal the whole; the dict form round-trips
    a, b = StreamingSummary(slo), StreamingSummary(slo)
    a.add(_batch(c, order[:9000]))
    b.add(_batch(c, order[9000:]))
    a.merge(StreamingSummary.from_dict(b.to_dict()))
    merged = a.summary(100.0)
    for key in ("ttft_s", "tpot_s", "e2e_s", "queue_time_s"):
        m, g = getattr(merged, key), getattr(got, key)
        assert (m.p50, m.p90, m.p95, m.p99, m.max, m.count) == (g.p50, g.p90, g.p95, g.p99, g.max, g.count)
        assert m.mean == pytest.approx(g.mean)  # sums in another order
    assert (merged.completed, merged.slo_attainment, merged.errors) == (got.completed, got.slo_attainment, got.errors)


def test_rolling_window_quantiles_equal_merged_windows() -> None:
    rng = np.random.default_rng(4)
    sk = RunSketches(window_s=1.0)
    t = np.sort(rng.uniform(0, 50, 10_000))
    v = rng.lognormal(-2, 1, len(t))
    v[:20] = 0.0
    for k in np.unique(np.floor(t)).astype(int).tolist():
        sk.window(k).add_array(v[np.floor(t) == k])
    times = [0.5, 3.2, 10.0, 25.7, 49.9, 80.0]
    assert sk.rolling_quantiles(times, 5.0, 0.99) == [sk.window_quantile(x - 5.0, x, 0.99) for x in times]
    assert sk.rolling_quantiles([80.0], 5.0, 0.5) == [None]
    other = RunSketches.from_dict(sk.to_dict())
    other.merge(sk)
    assert other.window(3).count == 2 * sk.window(3).count
