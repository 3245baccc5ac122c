"""What-if levers that cannot apply are ruled out with their reason, never a traceback."""

from __future__ import annotations

import pytest

from servecap.catalog import lookup_gpu, resolve_model
from servecap.catalog.gpus import gpu_catalog
from servecap.core.defaults import build_deployment
from servecap.core.levers import levers
from servecap.core.plan import plan
from servecap.specs.perf import RequestShape

LLAMA_70B = resolve_model("meta-llama/Llama-3.1-70B")
REQ = RequestShape(1024, 128)


def _tp16_lever(gpu_name: str) -> str:
    dep = build_deployment(LLAMA_70B, lookup_gpu(gpu_name), tp=8, weights_dtype="fp8", max_model_len=8192)
    rows = {row.name: row for row in levers(plan(dep, request=REQ))}
    return rows["TP 16"].note


def test_tp16_on_a_gpu_without_nic_bandwidth_is_ruled_out_with_the_reason() -> None:
    """Llama-3.1-70B FP8 on eight MI300X: TP 16 on eight-GPU nodes spans two nodes, and the
    catalog has no sourced MI300X NIC bandwidth to price the cross-node all-reduce with. The lever
    says so (the command line's own message for ``--tp 16``), with no numbers."""
    dep = build_deployment(LLAMA_70B, lookup_gpu("MI300X"), tp=8, weights_dtype="fp8", max_model_len=8192)
    rows = {row.name: row for row in levers(plan(dep, request=REQ))}
    tp16 = rows["TP 16"]
    assert tp16.max_concurrency is None and tp16.tpot_s is None and tp16.users_served is None
    assert tp16.note == (
        "cannot start: nodes=2: MI300X has no sourced inter-node NIC bandwidth (nic_gb_s); add it with --gpu-file"
    )
    # the other levers still plan
    assert rows["FP8 KV cache"].tpot_s is not None


def test_tp16_on_a_gpu_with_nic_bandwidth_still_plans() -> None:
    assert _tp16_lever("H100-SXM") == "twice the GPUs: compare cost per user"


@pytest.mark.parametrize("gpu", ["B200", "A100-80GB-SXM", "MI355X", "H200-NVL"])
def test_every_catalog_gpu_without_nic_rules_tp16_out(gpu: str) -> None:
    assert gpu in {g.id for g in gpu_catalog() if g.nic_gb_s is None}
    assert _tp16_lever(gpu).startswith(f"cannot start: nodes=2: {gpu} has no sourced inter-node NIC bandwidth")
