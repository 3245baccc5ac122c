"""Stored runs as the API reads them: damaged data as one line naming the run (HTTP 422), and a
measured run's deployment checked before the simulator plans it (names only, as in a body).

The run store skips or reports damaged rows itself (results/store.py); this is the server's
last line, so a row the store did not foresee is a 422 in the one error shape, never a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from servecap.errors import ServecapError

_T = TypeVar("_T")
_log = logging.getLogger("servecap.api")


class DamagedRun(ServecapError):
    """A stored run that cannot be read (bad JSON, a malformed row or deployment): HTTP 422."""


def stored(field: str, run_id: str | None, read: Callable[[], _T]) -> _T:
    """``read()`` of the run store, its failures on damaged data as one line naming the run."""
    import sqlite3

    from pydantic import ValidationError

    try:
        return read()
    except ServecapError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, ValidationError, sqlite3.DatabaseError) as err:
        _log.warning("damaged stored data (%s %s): %s: %s", field, run_id, type(err).__name__, err)
        problem = " ".join(str(err).split())[:160]
        raise DamagedRun(field, run_id, f"the stored data is damaged ({type(err).__name__}: {problem})") from None


def check_stored_deployment(deployment: object, upload_dir: Path) -> None:
    """A stored run's deployment, before the simulator plans it: a mapping whose model and GPU are
    names the server resolves (the catalog's, or an upload's), and no file."""
    from servecap.api.names import api_gpu, api_model, refuse_file_field

    if deployment is None:
        return  # the use case says how to store one
    if not isinstance(deployment, dict):
        raise DamagedRun("deployment", type(deployment).__name__, "the stored deployment is not a mapping")
    for key in ("gpu_file", "calibration"):
        if deployment.get(key) is not None:
            refuse_file_field(f"deployment.{key}", deployment[key])
    if deployment.get("model") is not None:
        api_model(upload_dir, deployment["model"], "deployment.model")
    if deployment.get("gpu") is not None:
        api_gpu(deployment["gpu"], "deployment.gpu")
