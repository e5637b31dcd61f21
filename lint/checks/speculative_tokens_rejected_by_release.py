"""Per-family and per-kernel limits on num_speculative_tokens that a vLLM release enforces
where the probe cannot see it: the first forward on a GPU the probe only pretends to be, or
a config check of a release whose model the probe cannot build on this machine. Which
release, GPU, method and architecture reject which N is a knowledge table in the rule's
options, read off the released sources; the inputs (method, N, GPU) and the probed release
decide whether an entry applies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import check
from .context import Context, Hit
from .knowledge import requested_method, require_columns, row_applies

_LIMIT_KEYS = {"id", "vllm", "methods", "architectures", "n", "when", "raises", "source", "fixed_in"}


@dataclass(frozen=True)
class LimitOptions:
    # The knowledge table: a release range, the methods and target architectures it concerns,
    # the N it rejects (a PEP 440 specifier on num_speculative_tokens), optionally the compute
    # capabilities (`sm`), and what is raised when.
    limits: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        require_columns("limits", self.limits, _LIMIT_KEYS)


@check(
    fields=("n", "method", "gpu", "sm", "vllm_version", "when", "raises", "source", "fixed_in"),
    options=LimitOptions,
)
def speculative_tokens_rejected_by_release(ctx: Context, options: LimitOptions) -> list[Hit]:
    n = ctx.inputs.num_speculative_tokens
    method = requested_method(ctx)
    sm = ctx.inputs.sm
    if not isinstance(n, int):
        return []
    hits: list[Hit] = []
    for entry in options.limits:
        if not row_applies(ctx, entry, n, method):
            continue
        hits.append(
            Hit(
                key=entry["id"],
                fields={
                    "n": n,
                    "method": method,
                    "gpu": ctx.inputs.gpu or f"SM {sm}",
                    "sm": sm,
                    "vllm_version": ctx.vllm_version,
                    "when": entry["when"],
                    "raises": entry["raises"],
                    "source": entry["source"],
                    "fixed_in": entry["fixed_in"],
                },
                basis="knowledge",
                location=ctx.config_location("architectures"),
                evidence={"entry": entry["id"], "vllm_range": entry["vllm"], "n_rejected": entry["n"]},
            )
        )
    return hits
