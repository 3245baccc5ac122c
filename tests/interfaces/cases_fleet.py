"""fleet simulate, fleet plan, sweep (one request each, three interfaces)."""

from __future__ import annotations

from tests.interfaces.harness import Case

CASES: list[Case] = []
