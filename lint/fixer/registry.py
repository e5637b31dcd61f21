"""Artifact-side fixes (`mtplint fix PATH --only ID`): id -> fix."""

from __future__ import annotations

FIXES: dict[str, object] = {}


def known(ids: list[str]) -> list[str]:
    return [i for i in ids if i in FIXES]
