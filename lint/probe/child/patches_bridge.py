"""Apply mtplint runtime patches inside the probe, by id, before any model is built."""

from __future__ import annotations

from typing import Any


def apply_patches(ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    from ...patches.catalog import apply

    return apply(ids)
