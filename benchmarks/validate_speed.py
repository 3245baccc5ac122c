"""Time `servecap validate` over the whole corpus and print its accuracy figures.

    PYTHONPATH=src python benchmarks/validate_speed.py [--write-baseline]

``--write-baseline`` records the current median errors in src/servecap/validation/baseline.json
(the figures the regression test holds the code to).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from servecap.validation.baseline import make_baseline
from servecap.validation.corpus import load_corpus
from servecap.validation.evaluate import compare_rows


def main() -> None:
    rows = load_corpus()
    t0 = time.perf_counter()
    comps = compare_rows(rows)
    wall_s = time.perf_counter() - t0
    base = make_baseline(comps, rows=len(rows))
    print(f"rows {len(rows)}  values {len(comps)}  sources {len({r.source.name for r in rows})}  wall {wall_s:.1f} s")
    for split in ("all", "train", "test"):
        med, mape = base.median_abs_error[split], base.mape[split]
        print(f"{split:5s} " + "  ".join(f"{f}: median {med[f]:.1%} MAPE {mape[f]:.1%}" for f in med))
    if "--write-baseline" in sys.argv:
        path = Path(__file__).resolve().parents[1] / "src/servecap/validation/baseline.json"
        path.write_text(base.model_dump_json(by_alias=True, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
