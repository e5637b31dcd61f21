"""Check functions named by the rule files.

A check is `fn(ctx, options) -> list[Hit]`, registered with `@check(fields=..., options=...)`:
`fields` are the message placeholders its hits fill, `options` the dataclass its rule's
`[options]` table is validated into (unknown keys and wrong types fail when rules load).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .context import Context, Hit

CheckFn = Callable[[Context, Any], list[Hit]]


@dataclass(frozen=True)
class CheckSpec:
    fn: CheckFn
    fields: frozenset[str]
    options: type | None  # a dataclass with a default for every option


REGISTRY: dict[str, CheckSpec] = {}


def check(*, fields: tuple[str, ...], options: type | None = None) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if fn.__name__ in REGISTRY:
            raise RuntimeError(f"two checks named {fn.__name__}")
        REGISTRY[fn.__name__] = CheckSpec(fn, frozenset(fields), options)
        return fn

    return register


def load_all() -> dict[str, CheckSpec]:
    # Every module of this package registers its checks on import.
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return REGISTRY
