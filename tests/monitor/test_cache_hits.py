"""The hit rate the engine model takes, read from where a server's prompt tokens found their KV.

The fixtures (tests/fixtures/metrics/vllm_cache_sources_t*.txt, README) are two scrapes 10 s
apart of one vLLM engine with LMCache as its KV connector. By hand, over the window:

- by source: local_compute 9000 - 4500 = 4500, local_cache_hit 15000 - 4000 = 11000,
  external_kv_transfer 6000 - 1500 = 4500: 20000 prompt tokens, (11000 + 4500) / 20000 = 77.5%
  cached, 55% in the engine's own cache and 22.5% loaded;
- prefix-cache counters: queries 30000 - 10000 = 20000, hits 15000 - 4000 = 11000, plus the
  connector's hits 6000 - 1500 = 4500 (of 15000 - 6000 = 9000 it was asked for): 77.5% again;
- prefix-cache counters and LMCache: its hit tokens 6000 - 1500 = 4500 (of 4600 requested): 77.5%.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from servecap.errors import ServecapError
from servecap.monitor.cache_hits import BY_SOURCE, PREFIX_AND_EXTERNAL, PREFIX_AND_LMCACHE, PREFIX_CACHE, cache_hits
from servecap.monitor.fleet import fleet_window
from servecap.monitor.history import history_from_store
from servecap.monitor.snapshot import Snapshot, parse_exposition
from servecap.monitor.watch import Watch
from servecap.monitor.window import window_stats

FIXTURES = Path(__file__).parents[1] / "fixtures/metrics"


def _text(t: int) -> str:
    return (FIXTURES / f"vllm_cache_sources_t{t}.txt").read_text()


def _without(text: str, *prefixes: str) -> str:
    return "\n".join(line for line in text.splitlines() if not any(p in line for p in prefixes)) + "\n"


def _pair(*drop: str, url: str = "http://a/metrics") -> tuple[Snapshot, Snapshot]:
    return (
        parse_exposition(_without(_text(0), *drop), url=url, time_s=0.0),
        parse_exposition(_without(_text(1), *drop), url=url, time_s=10.0),
    )


@pytest.mark.parametrize(
    ("drop", "source"),
    [
        ((), BY_SOURCE),
        (("prompt_tokens_by_source",), PREFIX_AND_EXTERNAL),
        (("prompt_tokens_by_source", "external_prefix"), PREFIX_AND_LMCACHE),
        (("prompt_tokens_by_source", "external_prefix", "lmcache:"), PREFIX_CACHE),
    ],
)
def test_every_reading_of_the_window_gives_the_hand_worked_rate(drop: tuple[str, ...], source: str) -> None:
    w = window_stats(*_pair(*drop))
    assert w.cache is not None and w.cache.source == source
    if source == PREFIX_CACHE:  # the engine's own cache only
        assert w.prefix_hit_rate == pytest.approx(11000 / 20000, abs=1e-12)
        assert w.cache.external_hit_tokens == 0
        return
    assert w.prefix_hit_rate == pytest.approx(0.775, abs=1e-12)
    assert w.cache.local_hit_rate == pytest.approx(0.55, abs=1e-12)
    assert w.cache.external_hit_rate == pytest.approx(0.225, abs=1e-12)
    assert w.cache.query_tokens == 20000


def test_the_fleet_adds_tokens_across_readings() -> None:
    """One replica read by source (20000 tokens, 15500 cached), one by its prefix counters only
    (20000 tokens, 11000 cached): (15500 + 11000) / 40000."""
    a = _pair(url="http://a/metrics")
    b = _pair("prompt_tokens_by_source", "external_prefix", "lmcache:", url="http://b/metrics")
    fleet = fleet_window([a, b])
    assert fleet.prefix_hit_rate == pytest.approx(26500 / 40000, abs=1e-12)
    assert fleet.cache is not None and BY_SOURCE in fleet.cache.source and PREFIX_CACHE in fleet.cache.source


def test_a_real_capture_still_reads_the_prefix_counters() -> None:
    snap = parse_exposition(
        (FIXTURES / "vllm_v1_mindie_pymotor_example.txt").read_text(), url="http://x/metrics", time_s=0.0
    )
    assert "prefix_queries" in snap.counters and not any(k.startswith("prompt_local") for k in snap.counters)
    later = Snapshot(
        snap.url,
        10.0,
        snap.engine,
        snap.model_name,
        snap.gauges,
        {**snap.counters, "prefix_queries": snap.counters["prefix_queries"] + 100.0},
    )
    hits = cache_hits(snap, later)
    assert hits is not None and hits.source == PREFIX_CACHE and hits.query_tokens == 100.0


@pytest.mark.parametrize(
    ("line", "bad", "named"),
    [
        ("vllm:prefix_cache_hits_total{", " NaN", "vllm:prefix_cache_hits_total"),
        ("vllm:prefix_cache_queries_total{", " -5", "vllm:prefix_cache_queries_total"),
        ("lmcache:num_hit_tokens_total{", " +Inf", "lmcache:num_hit_tokens_total"),
        ('source="local_cache_hit"', " -1e300", "local_cache_hit"),
        ('source="external_kv_transfer"', 'source="remote_ssd"', "remote_ssd"),
    ],
)
def test_garbage_values_are_one_line_naming_the_metric(line: str, bad: str, named: str) -> None:
    text = _text(1)
    target = next(x for x in text.splitlines() if line in x and not x.startswith("#"))
    if bad.startswith("source="):
        text = text.replace(target, target.replace(line, bad))
    else:  # the sample's value replaced
        text = text.replace(target, target.rsplit(" ", 1)[0] + bad)
    with pytest.raises(ServecapError) as err:
        parse_exposition(text, url="http://a/metrics", time_s=10.0)
    msg = str(err.value)
    assert named in msg and "http://a/metrics" in msg and "\n" not in msg


def test_a_counter_going_backwards_without_a_restart_is_refused() -> None:
    start, end = _pair()
    back = dict(end.counters, prompt_local_cache_hit=3000.0)  # below its 4000 at the start
    bad_end = Snapshot(end.url, 10.0, end.engine, end.model_name, end.gauges, back)
    with pytest.raises(ServecapError, match=r"went backwards.*not a restart"):
        cache_hits(start, bad_end)
    # a restart: the prompt-token counter went down too, every counter starts again
    restarted = dict(back, prompt_tokens=50.0)
    hits = cache_hits(start, Snapshot(end.url, 10.0, end.engine, end.model_name, end.gauges, restarted))
    assert hits is not None and hits.local_hit_tokens == 3000.0
    # and a watch shows the garbage as the target down, in one line, instead of a wrong rate
    watch = Watch([start.url], window_s=60.0)
    watch.add([start], 0.0)
    tick = watch.add([bad_end], 10.0)
    [t] = tick.targets
    assert not t.up and t.error is not None and "went backwards" in t.error and "\n" not in t.error


def test_more_hits_than_queries_is_refused() -> None:
    start, end = _pair("prompt_tokens_by_source", "external_prefix", "lmcache:")
    over = Snapshot(end.url, 10.0, end.engine, end.model_name, end.gauges, dict(end.counters, prefix_hits=40000.0))
    with pytest.raises(ServecapError, match="more tokens hit than looked up"):
        cache_hits(start, over)


def _store(path: Path, rows: list[tuple[float, float, float, object]]) -> None:
    """A monitor store with one session of fleet rows ``(time_s, rate, prompt_tok_s, hit_rate)``."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE monitor_sessions (session_id TEXT PRIMARY KEY, started_at TEXT, urls_json TEXT)")
        con.execute("INSERT INTO monitor_sessions VALUES ('s1', '2026-01-01T00:00:00', '[\"http://a\"]')")
        con.execute(
            "CREATE TABLE monitor_samples (session_id, url, time_s, up, request_rate_per_s, prompt_tok_s, "
            "generation_tok_s, prefix_hit_rate)"
        )
        con.executemany(
            "INSERT INTO monitor_samples VALUES ('s1', 'http://a', ?, 1, ?, ?, 100.0, ?)",
            rows,
        )


def test_the_recorded_hit_rate_reaches_the_replay(tmp_path: Path) -> None:
    """Weighted by prompt tokens: (0.8 x 1000 + 0.2 x 3000) / 4000 = 0.35; the replay's workload
    carries it as a shared prefix of 35% of the 1000-token mean prompt (4000 tok/s / 4 req/s)."""
    from servecap.app.monitor_replay import history_workload

    db = tmp_path / "m.sqlite"
    _store(db, [(0.0, 1.0, 1000.0, 0.8), (10.0, 3.0, 3000.0, 0.2)])
    h = history_from_store(db)
    assert h.prefix_hit_rate == pytest.approx(0.35, abs=1e-12)
    assert h.prompt_tokens == pytest.approx(1000.0)
    w = history_workload(h)
    assert w.prefix is not None and w.prefix.tokens == 350 and w.prompt_tokens.value == 650


@pytest.mark.parametrize("bad", [1.5, -0.1, 1e300, math.inf, "high"])  # SQLite stores a NaN as NULL: unrecorded
def test_a_damaged_recorded_hit_rate_is_one_line(tmp_path: Path, bad: object) -> None:
    db = tmp_path / "m.sqlite"
    _store(db, [(0.0, 1.0, 1000.0, 0.5), (10.0, 1.0, 1000.0, bad)])
    with pytest.raises(ServecapError, match="prefix_hit_rate") as err:
        history_from_store(db)
    assert "\n" not in str(err.value)
