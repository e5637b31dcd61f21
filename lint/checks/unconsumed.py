"""Checkpoint tensors the loaders put nowhere (MTP013) and scales routed to a dialect the
layer does not register (MTP014)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..core import mtp_layout
from ..core.findings import Location
from ..probe.report import MODELS
from ..view.report_view import frame_json
from . import check
from .context import Cause, Context, Hit


@dataclass(frozen=True)
class UnconsumedOptions:
    mtp_markers: list[str] = field(default_factory=lambda: ["mtp"])  # an MTP-looking group explains empty draft params
    group_depth: int = 3  # name components a group keeps (layer indices generalized)
    # Draft class -> tensor names its load_weights() skips by name on purpose (no mapper is
    # involved, so the probe cannot tell them from an oversight): knowledge read off vLLM.
    skipped_by_design: dict[str, list[str]] = field(default_factory=dict)


@check(fields=("count", "prefix", "example"), options=UnconsumedOptions)
def tensors_consumed_by_nothing(ctx: Context, options: UnconsumedOptions) -> list[Hit]:
    """Checkpoint tensors that neither model's own load_weights() put anywhere, without an
    error: the loaders skipped them silently. Grouped by top-level prefix, so a whole MTP
    block under a name the draft does not read is one finding. Tensors a vLLM loader
    discards by design (mapped to None), and those of MTP layers beyond the ones the draft
    builds, are not findings."""
    if not ctx.every_model_built:
        return []
    if ctx.inputs.separate_draft and any(m == "draft" and e.tensor is None for m, e in ctx.load_errors()):
        return []  # a separate draft's loader raised before reading its tensors (MTP008 says so)
    consumed: set[str] = set()
    for model in MODELS:
        consumed.update(ctx.fed(model))
    consumed.update(e.tensor for _model, e in ctx.load_errors() if e.tensor)
    for model in MODELS:
        consumed.update(ctx.load(model).held_back)  # read once their partner arrived
    consumed.update(_discarded_by_design(ctx))
    consumed.update(_skipped_by_draft_class(ctx, options.skipped_by_design))
    unconsumed = [t for t in ctx.inventory.tensors if t not in consumed and not _beyond_built_draft(ctx, t)]
    if not unconsumed:
        return []
    depth = options.group_depth
    groups: dict[str, list[str]] = defaultdict(list)
    for t in unconsumed:
        # Layer indices generalized, so 92 identical buffers are one finding.
        parts = ["*" if p.isdigit() else p for p in t.split(".")]
        groups[".".join(parts[:depth])].append(t)
    markers = [m.lower() for m in options.mtp_markers]
    own_target = _draft_is_the_target(ctx)
    hits = []
    for prefix, names in sorted(groups.items()):
        mtp = any(m in prefix.lower() for m in markers)
        if own_target and not mtp:
            continue  # the target's own tensors: its loader reads them (the target's lint judges them)
        hits.append(
            Hit(
                key=f"unconsumed:{prefix}",
                fields={"count": len(names), "prefix": prefix, "example": names[0]},
                location=Location(file=ctx.tensor_file(names[0]), tensor=names[0]),
                evidence={"examples": names[:8], "mtp_looking": mtp},
                # If the draft also has empty parameters, this is the likely reason.
                provides=[Cause("mtp-missing")] if mtp else [],
            )
        )
    return hits


def _draft_is_the_target(ctx: Context) -> bool:
    """`--draft` names the target's own checkpoint (`"model"` set to the target's path, as DSpark
    deployments of DeepSeek-V4 do): the draft's dry run sees the whole checkpoint, and only the
    target's load puts its trunk anywhere."""
    target, path = ctx.inputs.target, ctx.inputs.path
    if not target or not path:
        return False
    if target == path:
        return True
    if "://" in str(target) or "://" in str(path):
        return False
    return Path(str(target)).resolve() == Path(str(path)).resolve()


def _beyond_built_draft(ctx: Context, tensor: str) -> bool:
    """A tensor of an MTP layer past the ones the draft read: vLLM builds fewer MTP layers
    than the checkpoint ships by design (MiMo-V2 ships three and builds one,
    `_MIMO_V2_FLASH_NUM_MTP_LAYERS = 1` in vLLM 0.33.0 mimo_v2_mtp.py), so it is unused, not lost."""
    built = _draft_depth_fed(ctx)
    layer = mtp_layout.mtp_layer_index(tensor, mtp_layout.num_hidden_layers(ctx.inventory.config))
    return built is not None and layer is not None and layer >= built


def _discarded_by_design(ctx: Context) -> set[str]:
    """Tensors a vLLM WeightsMapper mapped to None while loading (the quant config's
    checkpoint weight mapper drops GPTQ `.g_idx`: "Discard activation-order metadata").
    The target dropping the MTP block (`mtp.` -> None) says "not mine", not "nobody's": the
    draft must still read it."""
    n_hidden = mtp_layout.num_hidden_layers(ctx.inventory.config)
    out = set(ctx.load("draft").discarded)
    out.update(t for t in ctx.load("target").discarded if not mtp_layout.is_mtp_name(t, n_hidden))
    return out


def _skipped_by_draft_class(ctx: Context, table: dict[str, list[str]]) -> set[str]:
    """Tensors the draft's own load_weights() passes over by name (EAGLE3's `t2d`, a mask the
    draft derives from `d2t` instead: `if "t2d" in name: continue`)."""
    draft = ctx.report.models.get("draft")
    cls = (draft.model_class or "").rsplit(".", 1)[-1] if draft is not None else ""
    names = table.get(cls, [])
    return {t for t in ctx.inventory.tensors if t in names or t.rsplit(".", 1)[-1] in names}


def _draft_depth_fed(ctx: Context) -> int | None:
    """How many MTP layers the draft read tensors of (the highest on-disk MTP layer it fed,
    plus one); None when it fed no per-layer MTP tensor."""
    cache = ctx.memo("draft_depth_fed")
    if "depth" not in cache:
        cache["depth"] = _fed_depth(ctx)
    return cache["depth"]


def _fed_depth(ctx: Context) -> int | None:
    n_hidden = mtp_layout.num_hidden_layers(ctx.inventory.config)
    layers = {
        i
        for t, params in ctx.fed("draft").items()
        if params and (i := mtp_layout.mtp_layer_index(t, n_hidden)) is not None
    }
    return max(layers) + 1 if layers else None


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
