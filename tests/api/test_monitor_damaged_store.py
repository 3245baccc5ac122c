"""`GET /api/v1/monitor/sessions` and `POST /api/v1/monitor/replay` on a damaged results file:
one line naming the store and the row with a 4xx, never a 500 with an internal error (issue 33)."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
from stored_cases import recording, steady

from servecap.api import ServeSettings, create_app

FLEET = {"pools": [{"name": "a", "model": "Qwen/Qwen3-0.6B", "gpu": "H100", "max_model_len": 4096, "replicas": 1}]}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _text_where_a_time_belongs(db: Path) -> None:
    db.write_bytes(recording([*steady(5), ("abc", 1, 5.0)]))


def _an_infinite_rate(db: Path) -> None:
    db.write_bytes(recording([*steady(5), (12.0, 1, float("inf"))]))


def _not_a_database(db: Path) -> None:
    db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)


def _urls_not_json(db: Path) -> None:
    db.write_bytes(recording(steady(5)))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE monitor_sessions SET urls_json = '{not json'")


DAMAGE = {
    "text where a time belongs": _text_where_a_time_belongs,
    "an infinite rate": _an_infinite_rate,
    "not a database": _not_a_database,
    "urls not JSON": _urls_not_json,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_store_is_a_one_line_4xx(client: TestClient, tmp_path: Path, damage: str) -> None:
    db = tmp_path / "runs.sqlite"
    DAMAGE[damage](db)
    for response in (
        client.get("/api/v1/monitor/sessions"),
        client.post("/api/v1/monitor/replay", json={"fleet": yaml.safe_load(yaml.safe_dump(FLEET))}),
    ):
        if damage in ("text where a time belongs", "an infinite rate") and response.request.method == "GET":
            assert response.status_code == 200  # the list reads no samples; the replay reads them
            continue
        if damage == "urls not JSON" and response.request.method == "POST":
            continue  # the replay reads no URLs: the list reads them
        assert 400 <= response.status_code < 500, (response.status_code, response.text)
        error = response.json()["error"]
        assert "internal error" not in error["message"] and "\n" not in error["message"]
        assert str(db) in error["message"], error["message"]  # the store is named (and the row, where one is)
