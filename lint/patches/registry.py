"""The bundled runtime patch set: id -> patch. Applied in vLLM processes by the plugin
(MTPLINT_PATCHES=ids) and inside the probe (--with-patches ids)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import BadInput


@dataclass
class Patch:
    id: str
    resolves: list[str]  # rule codes
    vllm: str  # PEP 440 specifier of the vLLM versions it applies to
    upstream: str  # the upstream PR it mirrors
    apply: Callable[[], dict[str, Any]] = field(repr=False)


PATCHES: dict[str, Patch] = {}


def known(ids: list[str]) -> list[str]:
    return [i for i in ids if i in PATCHES]


def apply(ids: list[str]) -> list[dict[str, Any]]:
    unknown = [i for i in ids if i not in PATCHES]
    if unknown:
        raise BadInput(f"unknown runtime patch id(s): {', '.join(unknown)}; "
                       f"bundled: {', '.join(PATCHES) or 'none yet'}")
    return [{"id": i, **PATCHES[i].apply()} for i in ids]
