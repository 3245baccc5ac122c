"""Every flag that writes a file refuses a target it cannot write -- a directory, an empty name,
/dev/full, a FIFO (no hang), /proc, /sys, a missing folder -- in one line naming the flag and
the path, before its work (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_cases import materialize, run_in_process
from output_cases import OUTPUT_FLAGS, TARGETS, one_line_names, output_cases


@pytest.mark.parametrize("case", list(output_cases()), ids=lambda c: c.name)
def test_output_target_is_refused_in_one_line(case: object, tmp_path: Path) -> None:
    argv = materialize(case, tmp_path)  # type: ignore[arg-type]
    result = run_in_process(argv, limit_s=10.0)
    assert result.outcome == "error", f"{argv}: {result.outcome}\n{result.stderr[-2000:]}"
    assert one_line_names(result.stderr, argv[-2], argv[-1]), result.stderr
    assert result.seconds < 5.0, f"refused only after {result.seconds:.1f} s: the target is checked after the work"


def test_every_output_flag_and_target_is_covered() -> None:
    assert len(list(output_cases())) == len(OUTPUT_FLAGS) * len(TARGETS)
