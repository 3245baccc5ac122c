"""A pool autoscaled by a registered policy other than target tracking (the KPA) is exported on
its signal and target, with a warning that names the policy: never dropped in silence."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.app.export import TARGETS, ExportOptions, export

FLEET = """\
pools:
  - name: burst
    model: meta-llama/Llama-3.1-8B
    gpu: H100
    autoscaler: {policy: kpa, max_replicas: 4, options: {panic_threshold_pct: 300}}
router: least-outstanding
"""


@pytest.mark.parametrize("target", ["keda", "kserve", "ray-serve", "production-stack"])
def test_kpa_pool_exports_with_a_warning(tmp_path: Path, target: str) -> None:
    assert target in TARGETS
    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET)
    res = export(target, f, ExportOptions())
    assert any(
        w.startswith("burst: autoscaler.policy kpa written as target tracking on num_requests_waiting target 5")
        for w in res.warnings
    ), res.warnings
