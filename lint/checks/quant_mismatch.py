"""Layers built with one quantization and fed another: quantized layers given unquantized
tensors (MTP002) and unquantized layers given quantized ones (MTP003)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from ..core.findings import Location
from ..inventory.fingerprint import split_module
from ..probe.report import MODELS, LoadError
from ..view.report_view import frame_json, is_quantized_method
from . import check
from .context import Cause, Context, Hit

_NO_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute")


def _group(ctx: Context) -> dict[tuple[str, str], list[LoadError]]:
    """Load errors by (model, the runtime module the failing tensor was headed for). Built
    once per lint: both checks of this module read it."""
    memo = ctx.memo("load_errors_by_module")
    if "groups" in memo:
        return memo["groups"]
    groups: dict[tuple[str, str], list[LoadError]] = defaultdict(list)
    runtime_parents: dict[tuple[str, str], str] | None = None
    for model, err in ctx.load_errors():
        module = ctx.error_module(model, err)
        if not module and _NO_ATTRIBUTE.search(err.message) and err.tensor:
            if runtime_parents is None:
                runtime_parents = _runtime_parents(ctx)
            module = _fused_layer_that_raised(ctx, model, err, runtime_parents)
        if module:
            groups[(model, module)].append(err)
    memo["groups"] = groups
    return groups


def _parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _runtime_parents(ctx: Context) -> dict[tuple[str, str], str]:
    """(model, on-disk parent module) -> the runtime parent its children's tensors were loaded
    under, by the probe's own name mapping (the most common answer where several differ)."""
    votes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for ondisk, model, prefix in ctx.ondisk_to_runtime:
        votes[(model, _parent(ondisk))][_parent(prefix)] += 1
    return {key: counter.most_common(1)[0][0] for key, counter in votes.items()}


def _fused_layer_that_raised(
    ctx: Context, model: str, err: LoadError, runtime_parents: dict[tuple[str, str], str]
) -> str | None:
    """A layer's own load_weights() raised (`'<Class>' object has no attribute ...`: a GPTQ
    MergedColumnParallelLinear has no `weight`, so vLLM hands the layer itself to its weight
    loader), for a tensor the model's mapper renamed into a fused layer (`in_proj_b` ->
    `in_proj_ba`): no parameter is named, and the names share no leading components. The
    layer is the one of that class, under the runtime parent the tensor's loaded siblings
    went to, that received nothing."""
    m = _NO_ATTRIBUTE.search(err.message)
    if m is None or not err.tensor:
        return None
    ondisk_module = split_module(err.tensor)[0]
    runtime_parent = runtime_parents.get((model, _parent(ondisk_module)))
    if runtime_parent is None:
        return None
    candidates = [
        d.module_path
        for d in ctx.decisions(model)
        if d.layer_class == m.group(1)
        and _parent(d.prefix) == runtime_parent
        and not any(ctx.param_initialized(model, p) for p in ctx.params_under(model, d.module_path))
    ]
    if not candidates:
        return None
    # Several untouched layers of the class: the fused name that extends the on-disk one.
    leaf = ondisk_module.rsplit(".", 1)[-1]
    return max(candidates, key=lambda path: _shared_start(path.rsplit(".", 1)[-1], leaf))


def _shared_start(a: str, b: str) -> int:
    """How many leading characters two names share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _tensor(err: LoadError) -> str:
    # Errors are grouped by what their tensor is stored as: only errors naming one are.
    assert err.tensor is not None
    return err.tensor


def _exclusion_causes(model: str, prefix: str) -> list[Cause]:
    """What a module built with the wrong scheme is most likely a consequence of: the dead
    exclusion entry meant for its prefix, or (draft) one meant for the MTP block."""
    causes = [Cause("exclusion-missed", (model, prefix))]
    return [*causes, Cause("mtp-exclusion")] if model == "draft" else causes


@check(fields=("module", "method", "disk_format", "tensor", "error"))
def quantized_layer_fed_unquantized(ctx: Context, options: None) -> list[Hit]:
    hits = []
    for (model, module), errs in _group(ctx).items():
        decision = ctx.decision_for_module_path(model, module)
        if decision is None or not is_quantized_method(decision.method):
            continue
        disk = [ctx.disk_format(e.tensor) for e in errs if e.tensor]
        if not disk or any(d is None or d.quantized for d in disk):
            continue
        first = errs[0]
        hit = Hit(
            key=f"{model}:{decision.prefix}",
            fields={
                "module": module,
                "method": decision.method,
                "disk_format": disk[0].kind,  # type: ignore[union-attr]  # none is None (above)
                "tensor": _tensor(first),
                "error": f"vLLM fails to load it: {first.type}: {first.message}",
            },
            location=Location(file=ctx.tensor_file(first.tensor), tensor=first.tensor),
            evidence={
                "model": model,
                "construction_prefix": decision.prefix,
                "layer_class": decision.layer_class,
                "failed_tensors": len(errs),
                "examples": [e.tensor for e in errs[:5]],
                "vllm_frame": frame_json(first),
                "runtime_params": sorted(ctx.params_under(model, module))[:12],
            },
            because=_exclusion_causes(model, decision.prefix),
            provides=[Cause("quant-mismatch", (model, module))],
            claims=[("load-error", model, e.tensor) for e in errs],
        )
        hits.append(hit)
    hits += _silent_quantized_fed_unquantized(ctx, {h.key for h in hits})
    return hits


# Parameters a fused-MoE quant method creates: they may live on a module inside the FusedMoE
# vLLM asked the quant config about (`mlp.experts.routed_experts.w13_weight` under
# `mlp.experts`), and are still that layer's quantized slots.
_MOE_SLOTS = ("w13_", "w2_")


def _quantized_decision_of(ctx: Context, model: str, param: str) -> Any:
    """The quantized decision of the module that registers `param` itself, or of the fused MoE
    whose expert weights it holds; None for a param of an unquantized module or of any other
    sub-part (router, norm) of a quantized block."""
    module, _, leaf = param.rpartition(".")
    decision = ctx.decision_for_module_path(model, module)
    if decision is None or not is_quantized_method(decision.method):
        return None
    if decision.module_path == module:
        return decision
    inside = module.startswith(f"{decision.module_path}.")
    return decision if inside and leaf.startswith(_MOE_SLOTS) else None


def _silent_quantized_fed_unquantized(ctx: Context, seen: set[str]) -> list[Hit]:
    """No error, still wrong: a 16-bit weight copied into a quantized layer's weight slot
    (same shape for per-tensor/block FP8), its scales never loaded."""
    hits: dict[str, Hit] = {}
    for model in MODELS:
        quantized_owner: dict[str, Any] = {}  # parameter -> the quantized decision owning it, or None
        for tensor, params, disk in ctx.fed_formats(model):
            if disk is None or disk.quantized or not tensor.endswith(".weight"):
                continue
            for p in params:
                if p not in quantized_owner:
                    quantized_owner[p] = _quantized_decision_of(ctx, model, p)
                decision = quantized_owner[p]
                if decision is None:
                    continue
                module = decision.module_path
                key = f"{model}:{decision.prefix}"
                if key in seen or key in hits:
                    continue
                param_dtype = _param_info(ctx, model, p)[0]
                # The layer's own slots: not those of other layers registered inside it (a
                # FusedMoE's `_shared_experts._layer` is the block's shared experts).
                unloaded = sorted(
                    q
                    for q in ctx.params_under(model, module)
                    if not ctx.param_initialized(model, q) and _quantized_decision_of(ctx, model, q) is decision
                )
                if not unloaded:
                    continue  # every quantized slot got a tensor: not this failure
                hits[key] = Hit(
                    key=key,
                    fields={
                        "module": module,
                        "method": decision.method,
                        "disk_format": disk.kind,
                        "tensor": tensor,
                        "error": f"vLLM loads it without an error: the {disk.weight_dtype} weight is "
                        f"copied into the {param_dtype} parameter and "
                        f"{', '.join(u.rsplit('.', 1)[1] for u in unloaded)} stay uninitialized",
                    },
                    location=Location(file=ctx.tensor_file(tensor), tensor=tensor),
                    evidence={
                        "model": model,
                        "construction_prefix": decision.prefix,
                        "silent": True,
                        "param": p,
                        "param_dtype": param_dtype,
                        "never_loaded": unloaded,
                    },
                    because=_exclusion_causes(model, decision.prefix),
                    provides=[Cause("quant-mismatch", (model, module))],
                )
    return list(hits.values())


@check(fields=("module", "layer_class", "disk_format", "tensor"))
def unquantized_layer_fed_quantized(ctx: Context, options: None) -> list[Hit]:
    hits = _raised_unquantized_fed_quantized(ctx)
    # A module vLLM raised for is reported once, from its error.
    for key, hit in _silent_unquantized_fed_quantized(ctx).items():
        hits.setdefault(key, hit)
    return list(hits.values())


def _raised_unquantized_fed_quantized(ctx: Context) -> dict[str, Hit]:
    """vLLM raised: a quantized tensor (or its scale) had no slot in an unquantized layer."""
    hits: dict[str, Hit] = {}
    for (model, module), errs in _group(ctx).items():
        decision = ctx.decision_for_module_path(model, module)
        if decision is not None and is_quantized_method(decision.method):
            continue
        disk = [ctx.disk_format(e.tensor) for e in errs if e.tensor]
        if not disk or not all(d is not None and d.quantized for d in disk):
            continue
        first = errs[0]
        layer_class = decision.layer_class if decision else _owner_class(ctx, model, module)
        hits[f"{model}:{module}"] = Hit(
            key=f"{model}:{module}",
            fields={
                "module": module,
                "layer_class": layer_class,
                "disk_format": disk[0].kind,  # type: ignore[union-attr]  # none is None (above)
                "tensor": _tensor(first),
            },
            location=Location(file=ctx.tensor_file(first.tensor), tensor=first.tensor),
            evidence={
                "model": model,
                "error": f"{first.type}: {first.message}",
                "vllm_frame": frame_json(first),
                "quant_method": decision.method if decision else None,
            },
            provides=[Cause("quant-mismatch", (model, module))],
            because=[Cause("exclusion-overbroad", (model, decision.prefix))] if decision else [],
            claims=[("load-error", model, e.tensor) for e in errs],
        )
    return hits


def _silent_unquantized_fed_quantized(ctx: Context) -> dict[str, Hit]:
    """No error: the packed weight landed in an unquantized parameter and its scales in nothing."""
    hits: dict[str, Hit] = {}
    for model in MODELS:
        plain: dict[str, Any] = {}  # parameter -> (dtype, class, module, decision) of a 16/32-bit unquantized one
        for tensor, params, disk in ctx.fed_formats(model):
            if disk is None or not disk.quantized or not tensor.endswith(".weight"):
                continue
            for p in params:
                if p not in plain:
                    plain[p] = _unquantized_wide_param(ctx, model, p)
                if plain[p] is None:
                    continue
                param_dtype, module_class, module, decision = plain[p]
                key = f"{model}:{module}"
                if key in hits or _dequantized_on_load(ctx, model, tensor, disk.suffixes):
                    continue
                hits[key] = Hit(
                    key=key,
                    fields={
                        "module": module,
                        "layer_class": module_class,
                        "disk_format": disk.kind,
                        "tensor": tensor,
                    },
                    location=Location(file=ctx.tensor_file(tensor), tensor=tensor),
                    evidence={
                        "model": model,
                        "param": p,
                        "param_dtype": param_dtype,
                        "disk_dtype": disk.weight_dtype,
                        "silent": True,
                    },
                    provides=[Cause("quant-mismatch", (model, module))],
                    because=[Cause("exclusion-overbroad", (model, decision.prefix))] if decision else [],
                )
    return hits


def _unquantized_wide_param(ctx: Context, model: str, param: str) -> Any:
    """(dtype, module class, module, decision) of a BF16/FP16/FP32 parameter of a module vLLM
    built unquantized; None otherwise."""
    param_dtype, module_class = _param_info(ctx, model, param)
    if param_dtype not in ("bfloat16", "float16", "float32"):
        return None
    module = param.rsplit(".", 1)[0]
    decision = ctx.decision_for_module_path(model, module)
    if decision is not None and is_quantized_method(decision.method):
        return None
    return param_dtype, module_class, module, decision


def _owner_class(ctx: Context, model: str, module: str) -> str | None:
    under = ctx.params_under(model, module)
    return ctx.params(model)[under[0]].module_class if under else None


def _param_info(ctx: Context, model: str, param: str) -> tuple[str | None, str | None]:
    """(dtype, module class) of a parameter, (None, None) where the model has none of that name."""
    info = ctx.params(model).get(param)
    return (info.dtype, info.module_class) if info else (None, None)


def _dequantized_on_load(ctx: Context, model: str, weight: str, suffixes: tuple[str, ...]) -> bool:
    """The loader read the weight's scales too (held back until both arrived, or fed): it
    upcasts the weight on load by design, as DeepSeek-V3.2's FP8 indexer `wk` into the fused
    BF16 `wk_weights_proj` (vLLM 0.33 deepseek_v2.py `_try_load_fp8_indexer_wk`)."""
    module = weight.rsplit(".", 1)[0]
    scales = [f"{module}.{leaf}" for leaf in suffixes if "scale" in leaf]
    read = ctx.read_tensors(model)
    return bool(scales) and all(s in read for s in scales)
