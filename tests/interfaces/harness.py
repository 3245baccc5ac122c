"""One request, three interfaces: the CLI's ``--json``, the HTTP API and the web page.

Each use case contributes :class:`Case` rows (``cases_*.py``); ``test_same_answer.py`` runs every
row through each interface it has and asserts the answers are equal after ``drop`` removes the
fields that legitimately differ (a run id, a wall-clock time series).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient

from servecap.cli.main import cli

Json = Any


@dataclass(frozen=True)
class Case:
    """One question asked of every interface that can answer it.

    ``cli`` is the argument list after ``servecap`` (``--json`` is appended); ``api`` is
    ``(method, path, body)``: a 200 answer is the result, a 202 is a job whose result is polled;
    ``drop`` names top-level keys removed from every answer before comparing (say why in
    ``why_dropped``); ``web`` optionally names a page and a function that reads the page's
    headline out of the answer, for the browser test to compare with what the page shows.
    """

    name: str
    cli: list[str]
    api: tuple[str, str, dict[str, Json]] | None
    drop: tuple[str, ...] = ()
    why_dropped: str = ""
    web: tuple[str, Callable[[Json], str]] | None = None
    setup: Callable[[TestClient], None] | None = field(default=None)


def cli_json(args: list[str]) -> Json:
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def api_json(client: TestClient, method: str, path: str, body: dict[str, Json], timeout_s: float = 120) -> Json:
    r = client.request(method, path, json=body if method != "GET" else None, params=body if method == "GET" else None)
    assert r.status_code in (200, 202), r.text
    if r.status_code == 200:
        return r.json()
    job_id = r.json()["id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = client.get(f"/api/v1/jobs/{job_id}").json()
        if snap["state"] in ("done", "failed", "cancelled"):
            assert snap["state"] == "done", snap
            return snap["result"]
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout_s} s")


def without(answer: Json, keys: tuple[str, ...]) -> Json:
    if not isinstance(answer, dict):
        return answer
    return {k: v for k, v in answer.items() if k not in keys}


def iter_cases(*groups: list[Case]) -> Iterator[Case]:
    for group in groups:
        yield from group
