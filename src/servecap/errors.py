"""The one exception type users see: a field, the value it had, and what is wrong with it.

Interfaces catch :class:`ServecapError` and print ``str(err)`` as one line with a non-zero
exit; nothing else in the library prints.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable


class ServecapError(Exception):
    """A user-facing error that names the offending field and value."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{_one_line(field)}={_show(value)}: {_one_line(problem)}")

    def __reduce__(self) -> tuple[type[ServecapError], tuple[str, object, str]]:
        """Picklable with its own fields (the server computes plans in worker processes)."""
        return (type(self), (self.field, self.value, self.problem))


class InfeasibleError(ServecapError):
    """The deployment cannot run: a memory or shape constraint fails (says which number)."""


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text or "\r" in text else text


def _show(value: object) -> str:
    text = repr(value) if isinstance(value, str) else _one_line(str(value))
    return text if len(text) <= 120 else text[:117] + "..."


def did_you_mean(value: str, choices: Iterable[str], *, n: int = 3) -> str:
    """A ' (did you mean: a, b?)' suffix for a mistyped name, or '' when nothing is close."""
    pool = list(choices)
    lowered = {c.lower(): c for c in pool}
    close = difflib.get_close_matches(value.lower(), list(lowered), n=n, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean: " + ", ".join(lowered[c] for c in close) + "?)"


_UNION_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")


def from_validation_error(
    err: object,
    prefix: str = "",
    *,
    allowed_keys: Callable[[list[str]], Iterable[str]] | None = None,
    skip: Collection[str] = (),
    brackets: bool = False,
    key_as_field: bool = False,
) -> ServecapError:
    """The ONE formatter of a pydantic ``ValidationError``: its first problem as one
    :class:`ServecapError` naming the field's path (after ``prefix``), the value and the problem.

    An unknown key is reported before anything else (a misspelt key also shows up as a missing
    one): given ``allowed_keys(parent_path)``, as the parent's field with the key as its value,
    "did you mean" and the allowed keys; without, as the key's own path. Pydantic's validator and
    union-tag segments (``function-after[...]``, and the names in ``skip``) are dropped from the
    path; a missing field "is required"; a mapping value is shown as ``{...}``; NaN and infinity
    are refused by name. ``brackets`` writes list indexes as ``[0]`` rather than ``.0``;
    ``key_as_field`` names an unknown key by its own path (with "did you mean").
    (Duck-typed on ``errors()``, so this module needs no pydantic.)"""
    errors = getattr(err, "errors", None)
    listed: list[dict[str, object]] = [dict(e) for e in errors()] if callable(errors) else []
    if not listed:
        return ServecapError(prefix or "input", None, str(err).splitlines()[0] if str(err) else "invalid value")
    first = next((e for e in listed if e.get("type") == "extra_forbidden"), listed[0])
    raw_loc = first.get("loc", ())
    parts = list(raw_loc) if isinstance(raw_loc, tuple | list) else [raw_loc]
    loc = [str(p) for p in parts if not str(p).startswith("function-") and str(p) not in skip]
    kind = str(first.get("type", ""))
    value = first.get("input")
    msg = str(first.get("msg", "invalid value"))
    if kind == "extra_forbidden":
        key = loc[-1] if loc else ""
        if allowed_keys is None:  # nothing to suggest: the key itself is the field
            return ServecapError(_path(prefix, loc, brackets), value, "unknown key")
        allowed = sorted(allowed_keys(loc[:-1]))
        if key_as_field:
            return ServecapError(_path(prefix, loc, brackets), None, "unknown key" + did_you_mean(key, allowed))
        listing = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return ServecapError(
            _path(prefix, loc[:-1], brackets), key, "unknown key" + did_you_mean(key, allowed) + listing
        )
    field = _path(prefix, loc, brackets)
    if kind in _UNION_TAG_ERRORS:
        ctx = first.get("ctx")
        info: dict[str, object] = dict(ctx) if isinstance(ctx, dict) else {}
        expected = info.get("expected_tags", "")
        if kind == "union_tag_not_found":
            return ServecapError(field, value, f"needs a 'kind' (one of {expected})")
        return ServecapError(field + ".kind", info.get("tag"), f"unknown kind; expected one of {expected}")
    if kind == "missing":
        return ServecapError(field, None, "is required")
    if kind == "finite_number":
        msg = "must be a finite number (not NaN or infinity)"
    msg = msg.removeprefix("Value error, ")
    return ServecapError(field, "{...}" if isinstance(value, dict) else value, msg)


def _path(prefix: str, loc: list[str], brackets: bool) -> str:
    if brackets:
        text = prefix + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc)
        return text.lstrip(".") or "input"
    return ".".join(part for part in (prefix, *loc) if part) or "input"
