"""The upload folder is bounded: past the quota's file count or total bytes, the least recently
used uploads are deleted (a name used again is kept longest)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servecap.api import ServeSettings, create_app
from servecap.api.uploads import UploadQuota

CONFIG = json.loads(
    (Path(__file__).parents[2] / "src/servecap/catalog/data/models/meta-llama--Llama-3.1-8B.json").read_text()
)


def _config(i: int) -> dict[str, Any]:
    return {**CONFIG, "vocab_size": 128_256 + i}  # distinct content, a valid config


def _client(tmp_path: Path, quota: UploadQuota) -> TestClient:
    settings = ServeSettings(data_dir=tmp_path, db=tmp_path / "runs.sqlite", upload_quota=quota)
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path, UploadQuota(max_files=3)) as c:
        yield c


def _upload(c: TestClient, i: int) -> str:
    r = c.post("/api/v1/models/upload", json={"config": _config(i)})
    assert r.status_code == 200, r.text
    return str(r.json()["model"])


def _plans(c: TestClient, name: str) -> bool:
    r = c.post("/api/v1/plan", json={"model": name, "gpu": "H100", "prompt_tokens": 1000 + len(name)})
    assert r.status_code in (200, 400), r.text
    return r.status_code == 200


def test_past_the_file_count_the_least_recently_used_go(client: TestClient, tmp_path: Path) -> None:
    names = [_upload(client, i) for i in range(3)]
    old = os.path.getmtime(tmp_path / "uploads" / f"{names[0][7:]}.json")
    for i, name in enumerate(names):  # distinct ages, oldest first
        os.utime(tmp_path / "uploads" / f"{name[7:]}.json", (old - 30 + i, old - 30 + i))
    assert _upload(client, 0) == names[0]  # uploaded again: now the most recent
    fourth = _upload(client, 3)
    kept = {p.stem for p in (tmp_path / "uploads").glob("*.json")}
    assert kept == {names[0][7:], names[2][7:], fourth[7:]}  # names[1] was the least recently used
    r = client.post("/api/v1/plan", json={"model": names[1], "gpu": "H100"})
    assert r.status_code == 400 and "upload it again" in r.json()["error"]["message"]
    assert _plans(client, fourth)


def test_past_the_total_bytes_the_oldest_go(tmp_path: Path) -> None:
    size = len(json.dumps(_config(0), sort_keys=True, separators=(",", ":")))
    with _client(tmp_path, UploadQuota(max_total_bytes=int(size * 2.5), max_files=1000)) as c:
        for i in range(10):
            _upload(c, i)
        files = list((tmp_path / "uploads").glob("*.json"))
        assert len(files) == 2 and sum(f.stat().st_size for f in files) <= size * 2.5
        assert not list((tmp_path / "uploads").glob("*.tmp"))
