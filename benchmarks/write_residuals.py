"""Write ``src/servecap/validation/residuals.json``: servecap's error on every corpus value
(``predicted / measured - 1``), with the row's engine, GPU family, metric family and split —
what :func:`servecap.validation.interval.interval` builds its 80% intervals from (the training
half's values) and what ``tests/validation/test_interval.py`` checks the coverage of (the
held-out half's). Rerun after any change that moves ``servecap validate``'s figures.

    PYTHONPATH=src .venv/bin/python benchmarks/write_residuals.py
"""

from __future__ import annotations

import json

from servecap.app.validate import validate
from servecap.validation.interval import residuals_path


def main() -> None:
    resp = validate()
    items = [
        {
            "row": v.row,
            "engine": v.engine,
            "gpu_family": v.gpu_family,
            "metric": v.family,
            "split": v.split,
            "error": round(v.error, 6),
            "model_class": v.model_class,
            "engine_version": v.engine_version,
        }
        for v in resp.values
        if v.error is not None
    ]
    path = residuals_path()
    doc = {
        "schema_version": "servecap.residuals/1",
        "about": "servecap validate's error (predicted / measured - 1) per corpus value; "
        "written by benchmarks/write_residuals.py",
        "residuals": items,
    }
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{len(items)} residuals -> {path}")


if __name__ == "__main__":
    main()
