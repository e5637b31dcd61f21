"""Checks of what the forward pass will read from the modules the probe built.

The probe never runs a forward (no GPU kernels on meta), so which attributes a forward
reads comes from a versioned knowledge table in the rule's options; what the built modules
actually have comes from the probe."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.versions import in_range
from ..probe.report import ParamInfo
from . import check
from .context import Context, Hit
from .knowledge import require_columns


def _entry_applies(ctx: Context, entry: dict[str, Any]) -> bool:
    archs = set(entry.get("architectures") or [])
    if archs and not archs & set(ctx.inventory.config.get("architectures") or []):
        return False
    return in_range(ctx.vllm_version, entry["vllm"])


def _own_params(ctx: Context, model: str, module: str) -> dict[str, ParamInfo]:
    params = ctx.params(model)
    return {p.rsplit(".", 1)[1]: params[p] for p in ctx.params_under(model, module) if p.rsplit(".", 1)[0] == module}


_READ_KEYS = {"id", "vllm", "module", "needs_any", "reader", "raises"}


@dataclass(frozen=True)
class ForwardOptions:
    # The knowledge table: forward-path functions of a vLLM range and what they read.
    reads: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        require_columns("reads", self.reads, _READ_KEYS)


@check(
    fields=(
        "model",
        "module",
        "count",
        "needs",
        "have",
        "weight_dtype",
        "module_class",
        "reader",
        "vllm_version",
        "raises",
    ),
    options=ForwardOptions,
)
def forward_reads_missing_attribute(ctx: Context, options: ForwardOptions) -> list[Hit]:
    hits: list[Hit] = []
    replaced = ctx.replaced_functions()
    for entry in options.reads:
        if not _entry_applies(ctx, entry) or entry["reader"] in replaced:
            continue
        pattern = re.compile(entry["module"])
        needs = list(entry["needs_any"])
        for model in ("target", "draft"):
            modules = sorted(m for m in ctx.module_paths(model) if pattern.search(m))
            lacking = {
                m: own for m in modules if (own := _own_params(ctx, model, m)) and not any(n in own for n in needs)
            }
            if not lacking:
                continue
            first, own = next(iter(lacking.items()))
            weight = own.get("weight")
            hits.append(
                Hit(
                    key=f"{model}:{entry['id']}",
                    fields={
                        "model": model,
                        "module": first,
                        "count": len(lacking),
                        "needs": " or ".join(needs),
                        "have": ", ".join(sorted(own)),
                        "weight_dtype": weight.dtype if weight else None,
                        "module_class": weight.module_class if weight else None,
                        "reader": entry["reader"],
                        "vllm_version": ctx.vllm_version,
                        "raises": entry["raises"],
                    },
                    location=ctx.config_location(),
                    evidence={
                        "model": model,
                        "modules": list(lacking)[:8],
                        "modules_count": len(lacking),
                        "knowledge": {
                            k: entry[k] for k in ("id", "vllm", "reader", "source", "fixed_in") if k in entry
                        },
                        "built_params": sorted(own),
                    },
                    basis="knowledge",
                )
            )
    return hits
