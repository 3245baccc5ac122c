"""bench, calibrate, accuracy, validate, monitor, export, runs, catalog (one request each, three interfaces)."""

from __future__ import annotations

from tests.interfaces.harness import Case

CASES: list[Case] = []
