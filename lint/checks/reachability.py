"""Checks over the weight-flow graph: does every draft parameter receive a tensor, either
loaded into it or shared from the target by the proposer's post-load wiring?"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.versions import in_range
from ..probe.report import ParamInfo
from . import check
from .context import Cause, Context, Hit
from .knowledge import require_columns
from .startup_outcome import unloaded_draft_param

HEAD_OR_EMBED = re.compile(r"(^|\.)(shared_head\.head|lm_head|embed_tokens|embedding)\.weight$")


def _unreached(ctx: Context) -> list[str]:
    if not ctx.built_ok("draft"):
        return []  # the draft never loaded: construction/config findings explain it
    # After wiring, replaced modules (a shared_head.head swapped for the target's lm_head)
    # are gone from the draft: only what the draft still holds matters at runtime.
    after = ctx.report.wiring.draft_params_after if ctx.report.wiring else None
    names = after if after is not None else list(ctx.params("draft"))
    params = ctx.params("draft")
    unreached = [p for p in names if p in params and not ctx.flow.initialized("draft", p)]
    if all(params[p].module_class is not None for p in unreached):
        return unreached
    owned: dict[str, list[ParamInfo]] = {}
    for name, info in params.items():
        if info.module_class is not None:
            owned.setdefault(_tail(name), []).append(info)
    return [p for p in unreached if not _alias(p, params[p], owned)]


def _tail(name: str) -> str:
    return ".".join(name.rsplit(".", 2)[-2:])


def _alias(name: str, info: ParamInfo, owned: dict[str, list[ParamInfo]]) -> bool:
    """A second path to a parameter listed under its own module: a module registered twice
    (`self_attn.mla_attn.kv_b_proj` is `self_attn.kv_b_proj`), which the probe lists (all
    names) but named_modules() never visits, so no module class is recorded for it. vLLM's
    start-up check walks named_parameters(), which yields each parameter once: an alias is
    never a parameter of its own, and reporting it again doubled MTP005 (Bailing V3, GLM-5.3).
    `owned`: the parameters with a module class, by their last two name components."""
    return info.module_class is None and any(o.shape == info.shape for o in owned.get(_tail(name), ()))


_INDICES = re.compile(r"\d+")


def _alias_modules(ctx: Context, param: str) -> list[str]:
    """The other paths of the module holding `param` (see _alias): the parameters named
    without a module class, with its last two name components, shape and layer indices."""
    params = ctx.params("draft")
    info = params.get(param)
    if info is None:
        return []
    tail, digits = _tail(param), _INDICES.findall(param)
    return sorted(
        {
            name.rsplit(".", 1)[0]
            for name, other in params.items()
            if name != param
            and other.module_class is None
            and _tail(name) == tail
            and other.shape == info.shape
            and _INDICES.findall(name) == digits
        }
    )


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
                because=[Cause("draft-method")],
            )
        )
    return hits


@dataclass(frozen=True)
class NeverLoadedOptions:
    # Parameters with a construction-time default that checkpoints legitimately omit
    # (attention KV-cache scales of ModelOpt/FP8 models) are not defects.
    optional_param_leaves: list[str] = field(default_factory=list)
    # quant method class -> leaves it creates zero-filled and drops after loading when no
    # tensor fed them (the rule file cites the release source).
    optional_by_method: dict[str, list[str]] = field(default_factory=dict)


@check(fields=("param", "module_class", "outcome"), options=NeverLoadedOptions)
def draft_params_never_loaded(ctx: Context, options: NeverLoadedOptions) -> list[Hit]:
    optional = set(options.optional_param_leaves)
    by_module: dict[str, list[str]] = {}
    for p in _unreached(ctx):
        if HEAD_OR_EMBED.search(p) or p.rsplit(".", 1)[-1] in optional or _optional_for_method(ctx, p, options):
            continue
        by_module.setdefault(p.rsplit(".", 1)[0], []).append(p)
    hits = []
    for module, params in by_module.items():
        info = ctx.params("draft").get(params[0])
        # The module (or an ancestor) was built with the wrong scheme; or built with a scheme
        # an exclusion entry was meant to keep it out of, whose added parameters have no
        # tensor on disk; or the MTP layers are not there at all.
        because = [Cause("quant-mismatch", ("draft", module), ancestors=True)]
        # The same parameters under a second path (Qwen3.5-MoE's `mlp.shared_expert` is
        # `mlp.experts._shared_experts._layer`): a load failure is reported under that one.
        because += [Cause("quant-mismatch", ("draft", m), ancestors=True) for m in _alias_modules(ctx, params[0])]
        decision = ctx.decision_for_module_path("draft", module)
        if decision:
            because.append(Cause("exclusion-missed", ("draft", decision.prefix)))
        because.append(Cause("mtp-missing"))
        because.append(Cause("draft-method"))
        err = ctx.load("draft").completeness_error
        hits.append(
            Hit(
                key=module,
                fields={
                    "param": params[0],
                    "module_class": info.module_class if info else None,
                    "outcome": unloaded_draft_param(ctx, params[0]),
                },
                location=ctx.config_location(),
                evidence={
                    "params": params,
                    "shapes": {p: ctx.params("draft")[p].shape for p in params},
                    "vllm_startup_error": f"{err.type}: {err.message}" if err else None,
                },
                because=because,
            )
        )
    return hits


_POST_LOAD_KEYS = {"id", "vllm", "methods", "format", "param", "signature", "raiser", "source", "raises"}


@dataclass(frozen=True)
class PostLoadOptions:
    # The knowledge table: quant methods whose process_weights_after_loading raises on a
    # parameter no tensor reached, per vLLM release range.
    rejects: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        require_columns("rejects", self.rejects, _POST_LOAD_KEYS)


def _own_params(ctx: Context, module: str) -> dict[str, ParamInfo]:
    params = ctx.params("draft")
    return {p.rsplit(".", 1)[1]: params[p] for p in ctx.params_under("draft", module) if p.rsplit(".", 1)[0] == module}


@check(
    fields=(
        "module",
        "module_class",
        "method",
        "format",
        "param",
        "vllm_version",
        "raiser",
        "raises",
        "shared_with",
        "entry",
    ),
    options=PostLoadOptions,
)
def unloaded_module_rejected_before_sharing(ctx: Context, options: PostLoadOptions) -> list[Hit]:
    """Draft modules the proposer replaces with the target's after loading (MTP004 and MTP005
    count them as shared), built with a quant method whose post-load step rejects a parameter
    no tensor fed. vLLM runs that step inside get_model(), before the proposer's sharing, so
    the replacement never happens: the server fails at startup."""
    wiring = ctx.report.wiring
    if not ctx.built_ok("draft") or wiring is None or wiring.draft_params_after is None:
        return []
    after = set(wiring.draft_params_after)
    loaded = ctx.loaded_set("draft") | {p for params in ctx.fed("draft").values() for p in params}
    key = ctx.inventory.declared.exclusion_key
    hits: list[Hit] = []
    for entry in options.rejects:
        if not in_range(ctx.vllm_version, entry["vllm"]):
            continue
        for d in ctx.decisions("draft"):
            if d.method not in entry["methods"]:
                continue
            module = d.module_path
            own = _own_params(ctx, module)
            # The method serves several formats; the parameters it built name the one it chose.
            if any(leaf not in own or own[leaf].dtype != dtype for leaf, dtype in entry["signature"].items()):
                continue
            param = f"{module}.{entry['param']}"
            if param in loaded:
                continue
            shared_with = wiring.shared.get(f"{module}.weight")
            if param in after and shared_with is None:
                continue  # not replaced: MTP005 reports its unloaded parameters
            names = d.compared or [d.prefix]
            hits.append(
                Hit(
                    key=module,
                    fields={
                        "module": module,
                        "module_class": d.layer_class,
                        "method": d.method,
                        "format": entry["format"],
                        "param": entry["param"],
                        "vllm_version": ctx.vllm_version,
                        "raiser": entry["raiser"],
                        "raises": entry["raises"],
                        "shared_with": shared_with.removesuffix(".weight") if shared_with else "module",
                        "entry": names[0],
                    },
                    location=ctx.config_location(key),
                    evidence={
                        "model": "draft",
                        "construction_prefix": d.prefix,
                        "compared_names": names,
                        "unloaded_params": sorted(
                            f"{module}.{leaf}" for leaf in own if f"{module}.{leaf}" not in loaded
                        ),
                        "shared_after_loading": {p: t for p, t in wiring.shared.items() if p.startswith(module + ".")},
                        "knowledge": {k: entry[k] for k in ("id", "vllm", "raiser", "source") if k in entry},
                        "on_disk_candidates": [
                            t
                            for t in ctx.inventory.tensors
                            if re.search(r"(^|\.)(lm_head|shared_head\.head|head)\.weight$", t)
                        ][:6],
                    },
                    # A tensor that failed to load into it (a BF16 head into NVFP4: MTP002) stops
                    # vLLM first; otherwise an exclusion entry meant for it and dead is the cause.
                    because=[
                        Cause("quant-mismatch", ("draft", module), ancestors=True),
                        Cause("exclusion-missed", ("draft", d.prefix)),
                        Cause("mtp-exclusion"),
                    ],
                    basis="knowledge",
                )
            )
    return hits


def _optional_for_method(ctx: Context, param: str, options: NeverLoadedOptions) -> bool:
    module, _, leaf = param.rpartition(".")
    decision = ctx.decision_for_module_path("draft", module)
    return decision is not None and leaf in options.optional_by_method.get(decision.method or "", ())
