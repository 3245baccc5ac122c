"""Name matching shared by the GPU and model catalogs."""

from __future__ import annotations

import re

_VENDOR_PREFIX = re.compile(r"^(nvidia|amd|geforce|instinct|radeon)+")


def normalize_name(name: str) -> str:
    """Case-insensitive, ignoring spaces, hyphens, underscores, dots-free vendor prefixes.

    ``"H100-SXM"``, ``"h100 sxm"``, ``"h100sxm"`` and ``"NVIDIA H100_SXM"`` all give ``"h100sxm"``.
    """
    key = re.sub(r"[\s\-_]+", "", name.strip().lower())
    return _VENDOR_PREFIX.sub("", key) or key
