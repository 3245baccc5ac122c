"""Split or not, servecap against NVIDIA's AIConfigurator on the same two cases.

servecap: ``fleet plan --levers split`` (Llama-3.1-8B on H100, the peak window simulated at
p99) on ``examples/workload-chat-short.yaml`` at 200 req/s (p99 TTFT 1 s, p99 TPOT 50 ms) and
``examples/workload-rag-long.yaml`` at 10 req/s (p99 TTFT 2 s, p99 TPOT 20 ms): the co-located
fleet's and the split's replicas and $/month. AIConfigurator (``aiconfigurator cli default``,
from the package registry, installed apart: ``python -m venv V && V/bin/pip install
aiconfigurator``): 8 H100 SXM GPUs, the vLLM backend, the median lengths (200 / 300 and 6,000 /
150) and the same TTFT and TPOT targets; its "Best Experiment Chosen" line (agg or disagg, and
by how much in tokens/s/GPU). It reads a model's ``config.json``: servecap's catalog copy is
written to a temporary directory.

    PYTHONPATH=src .venv/bin/python benchmarks/pd_split_vs_aiconfigurator.py --aiconfigurator V/bin/aiconfigurator
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
CATALOG = ROOT / "src" / "servecap" / "catalog" / "data" / "models"
CASES = (  # name, workload file, peak req/s, p99 TTFT s, p99 TPOT s, AIConfigurator isl, osl
    ("short chat", "examples/workload-chat-short.yaml", 200.0, 1.0, 0.05, 200, 300),
    ("long-prompt RAG", "examples/workload-rag-long.yaml", 10.0, 2.0, 0.02, 6000, 150),
)


def servecap_case(workload: str, rps: float, ttft: float, tpot: float) -> dict[str, str]:
    args = [sys.executable, "-m", "servecap", "fleet", "plan", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100"]
    args += ["-l", "8192", "--peak-rps", str(rps), "--workload", str(ROOT / workload), "--slo-ttft-p99-s", str(ttft)]
    args += ["--slo-tpot-p99-s", str(tpot), "--levers", "split", "--json"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=True)
    r = json.loads(out.stdout)
    fleet, split = r["fleet"], next(lv for lv in r["levers"] if lv["name"] == "split")
    split_usd = split["usd_per_month"]
    return {
        "co-located": f"{fleet['replicas']} x H100, ${fleet['usd_per_month']:,.0f}/month",
        "split": f"{split['change'].split(': ', 1)[1].split(' (')[0]}, ${split_usd or 0:,.0f}/month",
        "winner": "split" if split_usd is not None and split_usd < fleet["usd_per_month"] else "co-located",
    }


def aic_case(exe: str, isl: int, osl: int, ttft: float, tpot: float) -> str:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text((CATALOG / "meta-llama--Llama-3.1-8B.json").read_text())
        args = [exe, "cli", "default", "--model-path", d, "--total-gpus", "8", "--system", "h100_sxm"]
        args += ["--backend", "vllm", "--isl", str(isl), "--osl", str(osl), "--ttft", str(ttft * 1e3)]
        args += ["--tpot", str(tpot * 1e3), "--no-color"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    m = re.search(r"Best Experiment Chosen: (.*)", out.stdout + out.stderr)
    return m.group(1).strip() if m else "no answer"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--aiconfigurator", default=None, help="The aiconfigurator executable (skipped without).")
    args = ap.parse_args()
    print("| workload | servecap co-located | servecap split | servecap's answer | AIConfigurator (8 x H100, vLLM) |")
    print("|---|---|---|---|---|")
    for name, workload, rps, ttft, tpot, isl, osl in CASES:
        s = servecap_case(workload, rps, ttft, tpot)
        a = aic_case(args.aiconfigurator, isl, osl, ttft, tpot) if args.aiconfigurator else "not run"
        print(f"| {name} | {s['co-located']} | {s['split']} | {s['winner']} | {a} |")


if __name__ == "__main__":
    main()
