"""Click options whose default and help are a request field's: the one place the CLI reads them.

A use case's request (a pydantic model, or a frozen dataclass for ``plan``, which stays free of
pydantic) states each setting's default and help once; :func:`field_option` makes the
``--flag`` of a field from it, so ``--help``, the HTTP API's schema and the web forms show the
same default. Explicit ``help=`` or ``default=`` keyword arguments win (a flag that reads the
field differently, such as a comma-separated list).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def field_default_and_help(owner: type, name: str) -> tuple[object, str | None]:
    """The default and help of field ``name`` of ``owner``: a pydantic model (its ``default``
    and ``description``) or a dataclass (its default and ``metadata["help"]``)."""
    model_fields = getattr(owner, "model_fields", None)
    if isinstance(model_fields, dict):
        info = model_fields[name]
        return info.get_default(call_default_factory=True), info.description
    if is_dataclass(owner):
        for f in fields(owner):
            if f.name == name:
                default: object = f.default
                if default is MISSING:
                    default = f.default_factory() if f.default_factory is not MISSING else None
                text = f.metadata.get("help")
                return default, text if isinstance(text, str) else None
    raise KeyError(f"{owner.__name__} has no field {name}")


def field_option(owner: type, name: str, *decls: str, **attrs: Any) -> Decorator:
    """``click.option(*decls, **attrs)`` with the default and help of ``owner``'s field
    ``name`` (the option's parameter is ``name`` unless ``decls`` names another)."""
    default, text = field_default_and_help(owner, name)
    attrs.setdefault("default", default)
    if text is not None:
        attrs.setdefault("help", text)
    return click.option(*decls, **attrs)
