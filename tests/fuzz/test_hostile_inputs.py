"""Hostile files and flag values for every input path, in-process: each ends with exit code 0
(a valid value), or 1 or 2 with one line naming the field; never a traceback, never past a
few seconds. The issue's wrongly accepted values are refused."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hostile_cases import (
    BAD_FLOATS,
    FLOAT_FLAGS,
    HOSTILE_VALUES,
    INPUT_PATHS,
    Case,
    InputPath,
    file_cases,
    hostile_files,
    is_one_line_naming_a_field,
    leaves,
    materialize,
    replaced,
    run_in_process,
    special_cases,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LIMIT_S = 10.0  # a hang; every case here takes well under a second or two
FUZZ = settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def _check(case: Case, folder: Path, *, must_refuse: bool) -> None:
    argv = materialize(case, folder)
    result = run_in_process(argv, limit_s=LIMIT_S)
    assert result.outcome in ("error", "accepted"), f"{case.name}: {result.outcome}\n{result.stderr[-3000:]}"
    if result.outcome == "error":
        assert is_one_line_naming_a_field(result.stderr), f"{case.name}: {result.stderr!r}"
    if must_refuse:
        assert result.outcome == "error", f"{case.name}: accepted"


@pytest.mark.parametrize("path", INPUT_PATHS, ids=lambda p: p.name)
def test_hostile_files_are_refused_in_one_line(path: InputPath, tmp_path: Path) -> None:
    for i, case in enumerate(file_cases(path)):
        folder = tmp_path / str(i)
        folder.mkdir()
        _check(case, folder, must_refuse=case.must_refuse)


@st.composite
def _field_case(draw: st.DrawFn, path: InputPath) -> Case:
    key_path = draw(st.sampled_from(list(leaves(path.base))))
    value = draw(
        st.one_of(
            st.sampled_from(HOSTILE_VALUES),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(min_value=-(10**20), max_value=10**20),
            st.text(max_size=20),
        )
    )
    doc = replaced(path.base, key_path, value)
    return Case(f"{path.name}: {key_path} = {value!r}", path.args, {"f": path.render(doc)})


@pytest.mark.parametrize("path", INPUT_PATHS, ids=lambda p: p.name)
def test_any_field_of_any_file_is_handled(path: InputPath, tmp_path_factory: pytest.TempPathFactory) -> None:
    @FUZZ
    @given(case=_field_case(path))
    def check(case: Case) -> None:
        _check(case, tmp_path_factory.mktemp("f"), must_refuse=False)

    check()


@pytest.mark.parametrize("path", INPUT_PATHS, ids=lambda p: p.name)
def test_any_bytes_in_any_file_are_handled(path: InputPath, tmp_path_factory: pytest.TempPathFactory) -> None:
    @FUZZ
    @given(data=st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode)))
    def check(data: bytes) -> None:
        _check(
            Case(f"{path.name}: {data[:40]!r}", path.args, {"f": data}), tmp_path_factory.mktemp("b"), must_refuse=False
        )

    check()


@pytest.mark.parametrize(("base", "flag"), FLOAT_FLAGS, ids=[f"{b[0]} {f}" for b, f in FLOAT_FLAGS])
def test_non_finite_float_flags_are_refused_by_name(base: tuple[str, ...], flag: str, tmp_path: Path) -> None:
    for value in BAD_FLOATS:
        result = run_in_process([*base, flag, value], limit_s=LIMIT_S)
        assert result.outcome == "error", f"{flag} {value}: {result.outcome}\n{result.stderr[-2000:]}"
        named = flag in result.stderr or flag.lstrip("-").replace("-", "_") in result.stderr
        assert named and "\n" not in result.stderr.strip(), result.stderr


@pytest.mark.parametrize("case", list(special_cases()), ids=lambda c: c.name)
def test_the_issues_repros_are_refused(case: Case, tmp_path: Path) -> None:
    _check(case, tmp_path, must_refuse=True)


def test_yaml_alias_bomb_is_refused_fast() -> None:
    import time

    from hostile_cases import alias_bomb

    from servecap.errors import ServecapError
    from servecap.files import parse_document

    t0 = time.monotonic()
    with pytest.raises(ServecapError, match="alias bomb"):
        parse_document(alias_bomb(12, 9).decode(), "yaml", "workload", "bomb.yaml")
    assert time.monotonic() - t0 < 1.0


def _fingerprint(path: Path) -> tuple[int, int, str]:
    with sqlite3.connect(path) as con:
        runs = int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
        reqs = int(con.execute("SELECT count(*) FROM requests").fetchone()[0])
    return runs, reqs, hashlib.sha256(path.read_bytes()).hexdigest()


def test_refused_inputs_leave_the_store_untouched(tmp_path: Path) -> None:
    from servecap.results import RequestRecord, summarize
    from servecap.results.store import RunStore

    db = tmp_path / "runs.sqlite"
    store = RunStore(db)
    recs = [RequestRecord(0, 0.0, 10, 2, first_token_s=0.1, end_s=0.2, token_times_s=(0.1, 0.2))]
    store.save_simulated(
        run_id="keep-me", model="m", mode="open", settings={}, records=recs, summary=summarize(recs, duration_s=1.0)
    )
    before = _fingerprint(db)
    sweep = INPUT_PATHS[5]
    cases = [
        *(Case(f"runs delete {p}", ("runs", "delete", p, "--db", str(db))) for p in ("%", "_", "keep%", "' OR 1")),
        *(Case(f"runs show {p}", ("runs", "show", p, "--db", str(db))) for p in ("%", "k_ep-me")),
        *(
            Case(f"bench {flag} nan", ("bench", "http://127.0.0.1:9", "--rate", "1", flag, "nan", "--db", str(db)))
            for flag in ("--timeout-s", "--warmup-s", "--stall-timeout-s")
        ),
        *(
            Case(f"sweep {label}", ("sweep", "{f}", "--executor", "serial", "--db", str(db)), {"f": content})
            for label, content in hostile_files(sweep)
        ),
    ]
    for i, case in enumerate(cases):
        folder = tmp_path / f"c{i}"
        folder.mkdir()
        argv = materialize(case, folder)
        result = run_in_process(argv, limit_s=LIMIT_S)
        assert result.outcome == "error", f"{case.name}: {result.outcome} {result.stderr[-2000:]}"
        assert _fingerprint(db) == before, case.name


# flags whose accepted values only change a short simulation or a plan (no server, no network)
_LOCAL_FLAGS = [(b, f) for b, f in FLOAT_FLAGS if b[0] in ("simulate", "plan", "compare", "fleet")]


@FUZZ
@given(
    flag=st.sampled_from(_LOCAL_FLAGS),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.floats(min_value=-1e6, max_value=1e6).map(str),
        st.text(max_size=12),
    ),
)
def test_any_value_of_a_float_flag_is_handled(flag: tuple[tuple[str, ...], str], value: str) -> None:
    base, name = flag
    if value.startswith("-"):
        value = " " + value  # a leading dash would read as an option
    result = run_in_process([*base, name, value], limit_s=LIMIT_S)
    assert result.outcome in ("error", "accepted"), f"{name} {value!r}: {result.outcome}\n{result.stderr[-2000:]}"
    if result.outcome == "error":
        assert is_one_line_naming_a_field(result.stderr), result.stderr
