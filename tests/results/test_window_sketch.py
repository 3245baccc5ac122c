"""WindowSketch: the same buckets, quantiles and stored form as QuantileSketch, in one array."""

from __future__ import annotations

import numpy as np

from servecap.results.sketch import QuantileSketch
from servecap.results.sketch_set import RunSketches
from servecap.results.window_sketch import WindowSketch


def _pair(batches: list[tuple[np.ndarray, np.ndarray | None]]) -> tuple[WindowSketch, QuantileSketch]:
    w, q = WindowSketch(), QuantileSketch()
    for v, wt in batches:
        w.add_array(v, wt)
        q.add_array(v, wt)
    return w, q


def test_quantiles_and_stored_form_equal_the_package_sketch() -> None:
    rng = np.random.default_rng(3)
    batches: list[tuple[np.ndarray, np.ndarray | None]] = [
        (rng.lognormal(-3.0, 1.0, 500), None),
        (rng.lognormal(0.5, 0.3, 200), None),  # keys above the first batch's: the array widens
        (np.array([0.0, -0.2, -3.0, np.nan, 1e-3]), None),  # zeros, negatives, a NaN skipped
        (rng.lognormal(-6.0, 0.5, 50), rng.integers(1, 4, 50).astype(float)),  # below, weighted
    ]
    w, q = _pair(batches)
    assert w.count == q.count == 500 + 200 + 4 + int(batches[3][1].sum())  # type: ignore[union-attr]
    for p in (0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0):
        assert w.quantile(p) == q.quantile(p)
    assert w.to_dict() == q.to_dict()
    back = WindowSketch.from_dict(q.to_dict())
    assert back.to_dict() == q.to_dict() and back.quantile(0.99) == q.quantile(0.99)
    assert WindowSketch().quantile(0.5) is None


def test_merge_equals_adding_the_pooled_values() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(-2.0, 1.0, 300), rng.lognormal(1.0, 0.2, 100)
    wa, wb = WindowSketch(), WindowSketch()
    wa.add_array(a)
    wb.add_array(b)
    wb.merge(wa)  # the lower keys merged into the higher array
    pooled = QuantileSketch()
    pooled.add_array(b)  # the same order of the running sum
    pooled.add_array(a)
    assert wb.to_dict() == pooled.to_dict()
    assert [wb.quantile(p) for p in (0.5, 0.99)] == [pooled.quantile(p) for p in (0.5, 0.99)]


def test_a_window_holds_8_bytes_per_bucket_spanned() -> None:
    """What a streamed day's thousands of windows keep: one float64 per key from the lowest
    to the highest used (the package's store: a Python float object per bucket, in chunks of 128)."""
    w = WindowSketch()
    w.add_array(np.array([0.01, 0.02, 10.0]))
    span = w.offset + w.pos_counts.size - w.offset
    assert w.nbytes() == 8 * span
    # 0.01 s to 10 s at 1%: ln(1000) / ln(1.0202) ~ 346 keys
    assert 340 <= span <= 352


def test_run_sketches_windows_store_and_read_back() -> None:
    rs = RunSketches(window_s=15.0)
    rng = np.random.default_rng(5)
    for k in range(3):
        rs.window(k).add_array(rng.lognormal(-2.0, 0.5, 100))
    back = RunSketches.from_dict(rs.to_dict())
    assert all(isinstance(w, WindowSketch) for w in back.ttft_windows.values())
    assert back.to_dict() == rs.to_dict()
    assert back.window_quantile(0.0, 44.0, 0.99) == rs.window_quantile(0.0, 44.0, 0.99)
