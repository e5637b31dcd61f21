"""Finding a name in whichever module the probed release keeps it: releases move functions
between modules (entrypoints/openai -> entrypoints/common), and the probe replays the one
the release has."""

from __future__ import annotations

import importlib
from typing import Any


def first(modules: tuple[str, ...], name: str) -> Any:
    """`name` from the first of `modules` that imports and has it; None where none does."""
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except Exception:
            continue
        if found is not None:
            return found
    return None
