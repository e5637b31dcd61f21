"""Checkpoint tensors the loaders put nowhere (MTP013) and scales routed to a dialect the
layer does not register (MTP014)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..findings import Location
from ..probe.report import MODELS
from . import check
from .context import Cause, Context, Hit, frame_json


@dataclass(frozen=True)
class UnconsumedOptions:
    mtp_markers: list[str] = field(default_factory=lambda: ["mtp"])  # an MTP-looking group explains empty draft params
    group_depth: int = 3  # name components a group keeps (layer indices generalized)


@check(fields=("count", "prefix", "example"), options=UnconsumedOptions)
def tensors_consumed_by_nothing(ctx: Context, options: UnconsumedOptions) -> list[Hit]:
    """Checkpoint tensors that neither model's own load_weights() put anywhere, without an
    error: the loaders skipped them silently. Grouped by top-level prefix, so a whole MTP
    block under a name the draft does not read is one finding."""
    if not ctx.every_model_built:
        return []
    if ctx.report.request.pipeline_parallel_size > 1:
        return []  # only the last pipeline stage is modelled: other stages read the rest
    consumed: set[str] = set()
    for model in MODELS:
        consumed.update(ctx.fed(model))
    consumed.update(e.tensor for _model, e in ctx.load_errors() if e.tensor)
    unconsumed = [t for t in ctx.inventory.tensors if t not in consumed]
    if not unconsumed:
        return []
    depth = options.group_depth
    groups: dict[str, list[str]] = defaultdict(list)
    for t in unconsumed:
        # Layer indices generalized, so 92 identical buffers are one finding.
        parts = ["*" if p.isdigit() else p for p in t.split(".")]
        groups[".".join(parts[:depth])].append(t)
    markers = [m.lower() for m in options.mtp_markers]
    hits = []
    for prefix, names in sorted(groups.items()):
        mtp = any(m in prefix.lower() for m in markers)
        key = f"unconsumed:{prefix}"
        hits.append(
            Hit(
                key=key,
                fields={"count": len(names), "prefix": prefix, "example": names[0]},
                location=Location(file=ctx.tensor_file(names[0]), tensor=names[0]),
                evidence={"examples": names[:8], "mtp_looking": mtp},
                # If the draft also has empty parameters, this is the likely reason.
                provides=[Cause("mtp-missing")] if mtp else [],
            )
        )
    return hits


_SCALE_DIALECTS = ("weight_scale_inv", "weight_scale", "scale")


def _dialect(param: str) -> tuple[str, str] | None:
    """(stem, dialect) for a scale parameter name: `...w13_weight_scale_inv` -> (`...w13_`, `weight_scale_inv`)."""
    for d in _SCALE_DIALECTS:
        if param.endswith(d):
            return param[: -len(d)], d
    return None


@check(fields=("tensor", "module", "wanted", "have"))
def scale_dialect_mismatch(ctx: Context, options: None) -> list[Hit]:
    """A scale tensor vLLM routed to a parameter name the runtime layer does not register,
    while the layer registers the same scale under another dialect."""
    hits: dict[str, Hit] = {}
    for model, err in ctx.load_errors():
        missing = ctx.missing_param_in(err)
        if not missing or not (parts := _dialect(missing)):
            continue
        stem, wanted = parts
        have = [d for d in _SCALE_DIALECTS if d != wanted and f"{stem}{d}" in ctx.params(model)]
        if not have:
            continue
        module = ctx.module_of_param(model, missing)
        key = f"{model}:{module}:{wanted}"
        if key in hits:
            hits[key].evidence["failed_tensors"] += 1
            hits[key].claims.append(("load-error", model, err.tensor))
            continue
        hits[key] = Hit(
            key=key,
            fields={"module": module, "tensor": err.tensor, "wanted": wanted, "have": have[0]},
            location=Location(file=ctx.tensor_file(err.tensor), tensor=err.tensor),
            evidence={
                "model": model,
                "error": f"{err.type}: {err.message}",
                "vllm_frame": frame_json(err),
                "failed_tensors": 1,
                "registered": f"{stem}{have[0]}",
            },
            provides=[Cause("quant-mismatch", (model, module))],
            claims=[("load-error", model, err.tensor)],
        )
    return list(hits.values())
