"""Print (or, with --write, replace in docs/fleet.md) the fleet-plan worked example's block,
computed from examples/fleet-plan-chat.yaml: run it after a change to the step-time model.

    PYTHONPATH=src python scripts/fleet_plan_example.py --write
"""

from __future__ import annotations

import sys
from pathlib import Path

from servecap.app.fleet_plan import fleet_plan, load_plan_file, plan_request_from_dict
from servecap.report.fleet_plan_text import DOC_BEGIN, DOC_END, markdown_block

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "fleet-plan-chat.yaml"
DOC = ROOT / "docs" / "fleet.md"


def block() -> str:
    return markdown_block(fleet_plan(plan_request_from_dict(load_plan_file(EXAMPLE))))


def main() -> None:
    text = block()
    if "--write" not in sys.argv[1:]:
        print(text)
        return
    doc = DOC.read_text(encoding="utf-8")
    start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
    DOC.write_text(doc[:start] + text + doc[end:], encoding="utf-8")
    print(f"wrote the example block into {DOC}")


if __name__ == "__main__":
    main()
