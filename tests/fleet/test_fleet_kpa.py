"""The KPA autoscaler from a fleet file: in ``fleet simulate`` and in the monitor's advice (the
same registered policy, the same signal function)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from servecap.app.monitor import _advice
from servecap.app.monitor_fleet import pool_autoscaler
from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.monitor.advice import Advisor
from servecap.monitor.views import ScrapedReplica

FLEET = """\
pools:
  - name: h100
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    max_model_len: 4096
    cold_start: instant
    autoscaler:
      policy: kpa
      max_replicas: 6
      options: {stable_window_s: 20}
router: least-outstanding
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    return p


def test_kpa_runs_in_fleet_simulate(tmp_path: Path) -> None:
    args = ["fleet", "simulate", "--fleet", str(_write(tmp_path, FLEET)), "--rate", "100", "--num-requests", "600"]
    args += ["--prompt-tokens", "1024", "--output-tokens", "256", "--seed", "3", "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["outcomes"] == {"ok": 600}
    ups = [e for e in d["scale_events"] if e["to"] > e["from"]]
    # one replica cannot hold 100 req/s: at the first 2-s tick the panic window sees the queue
    # and the KPA jumps, not step by step as target tracking's 30-s decisions would
    assert ups and ups[0]["time_s"] == 2.0 and ups[0]["to"] - ups[0]["from"] >= 3, d["scale_events"]
    # decisions every 2 s (the knative-kpa preset's tick), so every event falls on the tick
    assert all(abs(e["time_s"] / 2.0 - round(e["time_s"] / 2.0)) < 1e-9 for e in d["scale_events"])
    assert max(e["to"] for e in d["scale_events"]) <= 6


def test_kpa_advises_in_the_monitor(tmp_path: Path) -> None:
    pa = pool_autoscaler(_write(tmp_path, FLEET))
    s = pa.settings
    assert (s.policy, s.interval_s, s.options) == ("kpa", 2.0, (("stable_window_s", 20.0),))
    advisor = Advisor(s, pa.pool, pa.source)
    calm = [ScrapedReplica(i, "h100", True, 5, 8, 0.3) for i in range(2)]
    for t in range(0, 20, 2):
        adv = advisor.advise(float(t), calm, None)
        assert adv is not None and adv.desired == 2  # 10 waiting / target 5
    burst = [ScrapedReplica(i, "h100", True, 40, 8, 0.9) for i in range(2)]
    adv = advisor.advise(20.0, burst, None)
    # panic window 2 s (10% of 20 s): 80 waiting -> 16 replicas >= 2 x 2 ready: panic, capped at 6
    assert adv is not None and adv.desired == 6 and adv.recommended == 16
    assert "panic mode" in adv.summary() and "2 → 6 replicas now" in adv.summary()
    shown = _advice(adv)  # the --json report's autoscaler entry
    assert (shown.policy, shown.mode, shown.desired_replicas) == ("kpa", "panic mode", 6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("policy: kpa", "policy: kap"), "fleet.pools[0].autoscaler.policy='kap'"),
        (("policy: kpa", "policy: kap"), "did you mean: kpa"),
        (("stable_window_s: 20", "stable_window: 20"), "autoscaler.options.stable_window=20"),
        (("policy: kpa", "policy: kpa\n      signal: kv_usage"), "policy 'kpa' reads one of"),
    ],
)
def test_fleet_file_policy_errors_are_one_line(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    with pytest.raises(ServecapError) as err:
        pool_autoscaler(_write(tmp_path, FLEET.replace(*change)))
    assert message in str(err.value) and "\n" not in str(err.value)
