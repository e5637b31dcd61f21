"""Check functions named by the rule files. Each takes (ctx, options) and returns Hits."""

from __future__ import annotations

from collections.abc import Callable

from ..engine.context import Context, Hit

CheckFn = Callable[[Context, dict], list[Hit]]
REGISTRY: dict[str, CheckFn] = {}


def check(fn: CheckFn) -> CheckFn:
    REGISTRY[fn.__name__] = fn
    return fn


def load_all() -> dict[str, CheckFn]:
    # Importing the modules registers their checks.
    from . import architecture, construction, exclusions, forward, kernels, loading, reachability  # noqa: F401

    return REGISTRY
