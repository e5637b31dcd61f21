"""Check functions named by the rule files.

A check is `fn(ctx, options) -> list[Hit]`, registered with `@check(fields=..., options=..., fixes=...)`:
`fields` are the message placeholders its hits fill, `options` the dataclass its rule's
`[options]` table is validated into (unknown keys and wrong types fail when rules load),
`fixes` the artifact fix ids its hits may narrow a finding to (each one declared in its rule
file's `[fixes] artifact`, checked when rules load: the rule file is where a fix is declared).
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
    fixes: frozenset[str] = frozenset()  # artifact fix ids a hit may name (Hit.artifact_fixes)


REGISTRY: dict[str, CheckSpec] = {}


def check(
    *, fields: tuple[str, ...], options: type | None = None, fixes: tuple[str, ...] = ()
) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if fn.__name__ in REGISTRY:
            raise RuntimeError(f"two checks named {fn.__name__}")
        REGISTRY[fn.__name__] = CheckSpec(fn, frozenset(fields), options, frozenset(fixes))
        return fn

    return register


def load_all() -> dict[str, CheckSpec]:
    # Every module of this package registers its checks on import.
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return REGISTRY
