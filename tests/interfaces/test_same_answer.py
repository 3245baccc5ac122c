"""The CLI's ``--json`` and the HTTP API give equal answers for the same request, for every use
case (issue 19): one parametrised test over the rows of ``cases_*.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.interfaces import cases_fleet, cases_measure, cases_sim
from tests.interfaces.harness import Case, api_json, cli_json, iter_cases, without

from servecap.api import ServeSettings, create_app

ALL = list(iter_cases(cases_sim.CASES, cases_fleet.CASES, cases_measure.CASES))


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


@pytest.mark.parametrize("case", [c for c in ALL if c.api is not None], ids=lambda c: c.name)
def test_cli_and_api_answer_alike(case: Case, client: TestClient) -> None:
    assert case.api is not None
    if case.setup is not None:
        case.setup(client)
    method, path, body = case.api
    from_api = without(api_json(client, method, path, body), case.drop)
    from_cli = without(cli_json(case.cli), case.drop)
    assert from_api == from_cli
