"""The hostile-input probe of issue 24, rerun: a few hundred hostile files and flag values sent
to every file input path (``plan -m FILE``, ``--gpu-file``, ``fleet simulate --fleet``,
``--workload``, ``--calibration``, a sweep file, an export source) and the float flags, each as
its own ``servecap`` process (as a user or a CI job runs it) with a 10 s limit.

Prints the count of each outcome: one-line errors, accepted, multi-line errors, tracebacks,
hangs past the limit; then every case that is not a one-line error or an acceptance, and every
case the issue lists as wrongly accepted that was accepted. Target: 0 tracebacks, 0 hangs,
0 multi-line, 0 wrongly accepted.

    .venv/bin/python benchmarks/hostile_inputs.py [--workers 2] [--limit-s 10] [--in-process] [--only issue33]

Issue 33 added: every output flag given a directory, an empty name, ``/dev/full``, a FIFO, a
file in ``/proc``, a new name in ``/sys``, a missing folder; calibrations with an efficiency of
1e-30 and a replica MTBF of 1e-9 s; damaged sketches rows, monitor recordings and Prometheus
exports (text, nulls, infinities, 1e300, deep nesting, 34M points, torn files); unusable Ray
addresses and worker counts; stores of schema version -1 or 99 given to every writer
(``--only issue33`` runs just those). "slowest refusal" is the slowest one-line error.

``--in-process`` runs every case in this process through the console entry point (faster; a
hang is caught by an alarm, which cannot interrupt a long C call, so the subprocess mode is the
faithful one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "fuzz"))

from hostile_cases import Case, Result, all_cases, classify, materialize, run_in_process


def run_subprocess(argv: list[str], limit_s: float) -> Result:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "servecap", *argv],
            capture_output=True,
            text=True,
            timeout=limit_s,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
        return Result("hang", -1, stderr, time.monotonic() - t0)
    return Result(classify(proc.returncode, proc.stderr), proc.returncode, proc.stderr, time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="cases run at once (subprocess mode)")
    ap.add_argument("--limit-s", type=float, default=10.0, help="a case running longer is a hang")
    ap.add_argument("--in-process", action="store_true", help="run the cases in this process (faster)")
    ap.add_argument("--only", choices=["issue33"], default=None, help="only issue 33's cases")
    ap.add_argument("--warm", action="store_true", help="in-process: run every case once before timing")
    args = ap.parse_args()

    if args.only == "issue33":
        from reliability_cases import reliability_cases

        cases = reliability_cases()
    else:
        cases = all_cases()
    with tempfile.TemporaryDirectory(prefix="servecap-hostile-") as tmp:
        # the store the runs commands see (and the default one, so no case touches the user's own)
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        jobs: list[tuple[Case, list[str]]] = []
        for i, case in enumerate(cases):
            folder = Path(tmp) / f"case{i}"
            folder.mkdir()
            jobs.append((case, materialize(case, folder)))
        t0 = time.monotonic()
        if args.in_process:
            if args.warm:  # every command's modules imported once, so the figures are the refusals'
                for _, argv in jobs:
                    run_in_process(argv, limit_s=args.limit_s)
            results = [run_in_process(argv, limit_s=args.limit_s) for _, argv in jobs]
        else:
            with ThreadPoolExecutor(args.workers) as pool:
                results = list(pool.map(lambda job: run_subprocess(job[1], args.limit_s), jobs))
        wall_s = time.monotonic() - t0

    counts = Counter(r.outcome for r in results)
    wrongly = [(c, r) for c, r in zip(cases, results, strict=True) if c.must_refuse and r.outcome == "accepted"]
    mode = "in-process" if args.in_process else f"subprocesses, {args.workers} at a time"
    print(f"{len(cases)} cases ({mode}, limit {args.limit_s:g} s) in {wall_s:.1f} s")
    for outcome in ("error", "accepted", "multiline", "traceback", "hang"):
        label = {"error": "one-line errors", "multiline": "multi-line errors", "hang": "hangs"}.get(
            outcome, outcome + "s" if outcome == "traceback" else outcome
        )
        print(f"  {label:<18} {counts.get(outcome, 0):>4}")
    print(
        f"  {'wrongly accepted':<18} {len(wrongly):>4}  (of {sum(c.must_refuse for c in cases)} that must be refused)"
    )
    slowest = max(results, key=lambda r: r.seconds)
    print(f"  slowest case       {slowest.seconds:.2f} s")
    refusals = [(c, r) for c, r in zip(cases, results, strict=True) if r.outcome == "error"]
    if refusals:
        case, worst = max(refusals, key=lambda cr: cr[1].seconds)
        print(f"  slowest refusal    {worst.seconds:.2f} s  ({case.name})")
    for case, result in zip(cases, results, strict=True):
        if result.outcome in ("multiline", "traceback", "hang"):
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            print(f"{result.outcome}: {case.name}: {tail[0][:200]}")
    for case, result in wrongly:
        print(f"wrongly accepted: {case.name} (exit {result.code})")


if __name__ == "__main__":
    main()
