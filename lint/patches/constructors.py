"""Shared by patches that wrap a model class's constructor: find the classes a release
ships, wrap each once, and refuse loudly when none is there."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any


def wrap_constructors(
    targets: Iterable[tuple[str, str]],
    marker: str,
    wrap: Callable[[Any], None],
    usable: Callable[[Any], bool] = lambda cls: True,
) -> list[str]:
    """Apply `wrap(cls)` to every (module, class) of `targets` this vLLM has and `usable`
    accepts, unless its __init__ already carries `marker`; the names of the classes covered."""
    done = []
    targets = list(targets)
    for module_name, class_name in targets:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue  # not in this release, or a platform package that does not import here
        if not usable(cls):
            continue
        if not getattr(cls.__init__, marker, False):
            wrap(cls)
            setattr(cls.__init__, marker, True)
        done.append(f"{module_name}.{class_name}")
    if not done:
        raise RuntimeError(
            "this vLLM has none of the classes the patch targets: " + ", ".join(f"{m}.{c}" for m, c in targets)
        )
    return done
