"""Checks over the weight-flow graph: does every draft parameter receive a tensor, either
loaded into it or shared from the target by the proposer's post-load wiring?"""

from __future__ import annotations

import re

from ..engine.context import Context, Hit
from . import check

HEAD_OR_EMBED = re.compile(r"(^|\.)(shared_head\.head|lm_head|embed_tokens|embedding)\.weight$")


def _unreached(ctx: Context) -> list[str]:
    if "draft" not in ctx.report.get("load", {}):
        return []  # the draft never loaded: construction/config findings explain it
    # After wiring, replaced modules (a shared_head.head swapped for the target's lm_head)
    # are gone from the draft: only what the draft still holds matters at runtime.
    after = ctx.report.get("wiring", {}).get("draft_params_after")
    names = after if after is not None else list(ctx.params("draft"))
    return [p for p in names if p in ctx.params("draft") and not ctx.flow.initialized("draft", p)]


@check
def draft_head_embed_unreachable(ctx: Context, options: dict) -> list[Hit]:
    hits = []
    wiring = ctx.report.get("wiring", {})
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
                    "proposer": wiring.get("proposer"),
                    "wiring_steps": wiring.get("steps"),
                    "shared_from_target": sorted(wiring.get("shared", {})),
                    "candidate_tensors": [
                        t
                        for t in ctx.inventory.tensors
                        if re.search(r"(^|\.)(head|lm_head|embed|embed_tokens|tok_emb)\.weight$", t)
                    ][:6],
                },
            )
        )
    return hits


@check
def draft_params_never_loaded(ctx: Context, options: dict) -> list[Hit]:
    # Parameters with a construction-time default that checkpoints legitimately omit
    # (attention KV-cache scales of ModelOpt/FP8 models) are not defects.
    optional = set(options.get("optional_param_leaves", []))
    by_module: dict[str, list[str]] = {}
    for p in _unreached(ctx):
        if HEAD_OR_EMBED.search(p) or p.rsplit(".", 1)[-1] in optional:
            continue
        by_module.setdefault(p.rsplit(".", 1)[0], []).append(p)
    hits = []
    for module, params in by_module.items():
        info = ctx.params("draft").get(params[0], {})
        cause = next(
            (
                v
                for k, v in ctx.causes.items()
                if k.startswith("quant-mismatch:draft:")
                and (module + ".").startswith(k.removeprefix("quant-mismatch:draft:") + ".")
            ),
            None,
        )
        if cause is None:
            # Built with a scheme an exclusion entry was meant to keep it out of (MTP001):
            # the parameters that scheme adds have no tensor on disk.
            decision = ctx.decision_for_module_path("draft", module)
            cause = decision and ctx.causes.get(f"exclusion-missed:draft:{decision['prefix']}")
        cause = cause or ctx.causes.get("mtp-missing")
        hits.append(
            Hit(
                key=module,
                fields={"param": params[0], "module_class": info.get("module_class")},
                location=ctx.config_location(),
                evidence={"params": params, "shapes": {p: ctx.params("draft")[p]["shape"] for p in params}},
                caused_by=cause,
            )
        )
    return hits
