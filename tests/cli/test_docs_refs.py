"""The docs' references resolve: every `.md` page, source path and doc section a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REF = re.compile(r"(?<![\w./-])((?:docs/|src/|tests/|benchmarks/|scripts/)?[\w.-]+(?:/[\w.-]+)*\.(?:md|py))\b")


# other projects' sources, cited by their own paths (a package's, or a repository's from its owner)
EXTERNAL = ("vllm/", "litellm/", "vllm-project/vllm/", "ai-dynamo/aiconfigurator/", "NVIDIA/TensorRT-LLM/")
FILES = [
    p.relative_to(ROOT).as_posix()
    for d in ("src", "tests", "docs", "benchmarks", "scripts")
    if (ROOT / d).is_dir()
    for p in (ROOT / d).rglob("*")
    if p.is_file()
] + [p.name for p in ROOT.glob("*.md")]


def _exists(ref: str) -> bool:
    """A path from the repository root, or the tail of one (``emulator/driver.py``, ``plan_sweep.py``)."""
    return ref.startswith(EXTERNAL) or any(f == ref or f.endswith("/" + ref) for f in FILES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_referenced_file_exists(page: Path) -> None:
    missing = sorted({ref for ref in REF.findall(page.read_text(encoding="utf-8")) if not _exists(ref)})
    assert not missing, f"{page.name} cites files the repository lacks: {missing}"
