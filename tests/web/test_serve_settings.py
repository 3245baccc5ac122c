"""`servecap serve`'s flags as settings: a token generated beyond loopback and printed in the
start-up URL, none on loopback unless asked, a warning when served open."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecap.api import ServeSettings
from servecap.errors import ServecapError
from servecap.web.serve_cmd import start_settings


def _settings(tmp_path: Path, **kw: object) -> tuple[ServeSettings, tuple[str, ...]]:
    start = start_settings(port=8080, data_dir=tmp_path, **{"host": "127.0.0.1", **kw})  # type: ignore[arg-type]
    assert isinstance(start.settings, ServeSettings)
    return start.settings, start.lines


def test_loopback_needs_no_token(tmp_path: Path) -> None:
    settings, lines = _settings(tmp_path)
    assert settings.guard.token is None and settings.guard.bind_host == "127.0.0.1"
    assert lines == ("servecap: serving the web app on http://127.0.0.1:8080/ (API at /api/v1, Ctrl-C to stop)",)


def test_every_interface_gets_a_generated_token_in_the_printed_url(tmp_path: Path) -> None:
    settings, lines = _settings(tmp_path, host="0.0.0.0")
    token = settings.guard.token
    assert token is not None and len(token) >= 24
    assert f"http://127.0.0.1:8080/?token={token}" in lines[0]
    assert any("every interface" in line for line in lines)
    other, _ = _settings(tmp_path, host="0.0.0.0")
    assert other.guard.token != token  # a new one each start


def test_a_given_token_is_used_even_on_loopback(tmp_path: Path) -> None:
    settings, lines = _settings(tmp_path, token="a-token-of-sixteen+")
    assert settings.guard.token == "a-token-of-sixteen+" and "?token=a-token-of-sixteen+" in lines[0]
    with pytest.raises(ServecapError, match="at least 16 characters"):
        _settings(tmp_path, host="0.0.0.0", token="short")
    with pytest.raises(ServecapError, match="not both"):
        _settings(tmp_path, token="a-token-of-sixteen+", no_token=True)


def test_no_token_beyond_loopback_warns(tmp_path: Path) -> None:
    settings, lines = _settings(tmp_path, host="192.0.2.2", no_token=True)
    assert settings.guard.token is None
    assert any("WARNING" in line and "anyone who can reach this port" in line for line in lines)


def test_limits_come_from_the_flags(tmp_path: Path) -> None:
    settings, _ = _settings(
        tmp_path, max_requests=1000, max_body_mb=0.5, upload_quota_mb=10, max_uploads=5, job_memory_mb=0
    )
    assert settings.limits.max_requests == 1000 and settings.limits.max_users == 100_000
    assert settings.guard.max_body_bytes == 512 * 1024
    assert settings.upload_quota.max_total_bytes == 10 * 1024 * 1024 and settings.upload_quota.max_files == 5
    assert settings.job_memory_bytes is None
    with pytest.raises(ServecapError, match="unknown work limits"):
        _settings(tmp_path, max_bananas=3)
