"""The one exception type users see: a field, the value it had, and what is wrong with it.

Interfaces catch :class:`ServecapError` and print ``str(err)`` as one line with a non-zero
exit; nothing else in the library prints.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ServecapError(Exception):
    """A user-facing error that names the offending field and value."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field}={_show(value)}: {problem}")

    def __reduce__(self) -> tuple[type[ServecapError], tuple[str, object, str]]:
        """Picklable with its own fields (the server computes plans in worker processes)."""
        return (type(self), (self.field, self.value, self.problem))


class InfeasibleError(ServecapError):
    """The deployment cannot run: a memory or shape constraint fails (says which number)."""


def _show(value: object) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def did_you_mean(value: str, choices: Iterable[str], *, n: int = 3) -> str:
    """A ' (did you mean: a, b?)' suffix for a mistyped name, or '' when nothing is close."""
    pool = list(choices)
    lowered = {c.lower(): c for c in pool}
    close = difflib.get_close_matches(value.lower(), list(lowered), n=n, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean: " + ", ".join(lowered[c] for c in close) + "?)"


def from_validation_error(err: object, prefix: str = "") -> ServecapError:
    """The first problem of a pydantic ``ValidationError`` as one :class:`ServecapError`: the field's
    dotted path (after ``prefix``), the value given and pydantic's message. (Duck-typed on
    ``errors()``, so this module needs no pydantic.)"""
    errors = getattr(err, "errors", None)
    listed = errors() if callable(errors) else []
    first: dict[str, object] = dict(listed[0]) if listed else {"loc": (), "msg": str(err), "input": None}
    loc_parts = first.get("loc", ())
    loc = ".".join(str(part) for part in loc_parts) if isinstance(loc_parts, tuple | list) else str(loc_parts)
    name = ".".join(part for part in (prefix, loc) if part) or "input"
    return ServecapError(name, first.get("input"), str(first.get("msg", "invalid value")))
