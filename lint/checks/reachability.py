"""Checks over the weight-flow graph: does every draft parameter receive a tensor, either
loaded into it or shared from the target by the proposer's post-load wiring?"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import check
from .context import Cause, Context, Hit

HEAD_OR_EMBED = re.compile(r"(^|\.)(shared_head\.head|lm_head|embed_tokens|embedding)\.weight$")


def _unreached(ctx: Context) -> list[str]:
    if not ctx.built_ok("draft"):
        return []  # the draft never loaded: construction/config findings explain it
    # After wiring, replaced modules (a shared_head.head swapped for the target's lm_head)
    # are gone from the draft: only what the draft still holds matters at runtime.
    after = ctx.report.wiring.draft_params_after if ctx.report.wiring else None
    names = after if after is not None else list(ctx.params("draft"))
    return [p for p in names if p in ctx.params("draft") and not ctx.flow.initialized("draft", p)]


@check(fields=("param", "role", "vllm_version"))
def draft_head_embed_unreachable(ctx: Context, options: None) -> list[Hit]:
    hits = []
    wiring = ctx.report.wiring
    for p in _unreached(ctx):
        if not HEAD_OR_EMBED.search(p) or p.rsplit(".", 1)[-1] != "weight":
            continue
        role = "embedding" if "embed" in p else "lm head"
        hits.append(
            Hit(
                key=p,
                fields={"param": p, "role": role, "vllm_version": ctx.vllm_version},
                location=ctx.config_location(),
                evidence={
                    "proposer": wiring.proposer if wiring else None,
                    "wiring_steps": wiring.steps if wiring else None,
                    "shared_from_target": sorted(wiring.shared) if wiring else [],
                    "candidate_tensors": [
                        t
                        for t in ctx.inventory.tensors
                        if re.search(r"(^|\.)(head|lm_head|embed|embed_tokens|tok_emb)\.weight$", t)
                    ][:6],
                },
            )
        )
    return hits


@dataclass(frozen=True)
class NeverLoadedOptions:
    # Parameters with a construction-time default that checkpoints legitimately omit
    # (attention KV-cache scales of ModelOpt/FP8 models) are not defects.
    optional_param_leaves: list[str] = field(default_factory=list)


@check(fields=("param", "module_class"), options=NeverLoadedOptions)
def draft_params_never_loaded(ctx: Context, options: NeverLoadedOptions) -> list[Hit]:
    optional = set(options.optional_param_leaves)
    by_module: dict[str, list[str]] = {}
    for p in _unreached(ctx):
        if HEAD_OR_EMBED.search(p) or p.rsplit(".", 1)[-1] in optional:
            continue
        by_module.setdefault(p.rsplit(".", 1)[0], []).append(p)
    hits = []
    for module, params in by_module.items():
        info = ctx.params("draft").get(params[0])
        # The module (or an ancestor) was built with the wrong scheme; or built with a scheme
        # an exclusion entry was meant to keep it out of, whose added parameters have no
        # tensor on disk; or the MTP layers are not there at all.
        because = [Cause("quant-mismatch", ("draft", module), ancestors=True)]
        decision = ctx.decision_for_module_path("draft", module)
        if decision:
            because.append(Cause("exclusion-missed", ("draft", decision.prefix)))
        because.append(Cause("mtp-missing"))
        hits.append(
            Hit(
                key=module,
                fields={"param": params[0], "module_class": info.module_class if info else None},
                location=ctx.config_location(),
                evidence={"params": params, "shapes": {p: ctx.params("draft")[p].shape for p in params}},
                because=because,
            )
        )
    return hits
