"""Checks over the dry-run load as a whole: MTP layers missing, load errors no other rule explains."""

from __future__ import annotations

from collections import defaultdict

from ..core import mtp_layout
from ..core.findings import Location
from ..probe.report import ErrorRecord, LoadError
from ..view.report_view import frame_json
from . import check
from .context import Cause, Context, Hit

# Methods whose draft is a stack of MTP-style layers numbered from the checkpoint's config: an
# MTP block (the target's or an assistant's), or DeepSeek-V4's DSpark stages under the target's
# `mtp.*` (a DSpark draft of its own, `--draft`, is a DFlash-style head).
_LAYER_COUNTED = ("mtp", "dspark")


@check(fields=("config_key", "expected", "found", "error", "remedy"))
def mtp_layers_missing(ctx: Context, options: None) -> list[Hit]:
    """Fewer MTP layers shipped than the depth vLLM builds the draft with. Layers are counted
    (mtplint.core.mtp_layout) from what the dry-run fed the draft and from every shard on disk,
    indexed or not: a layer on disk that does not load is another rule's finding (MTP008 /
    MTP015), not a depth the checkpoint lacks. Most loaders (GLM-4.x, Qwen3.5, Qwen3-Next,
    MiMo in vLLM 0.33.0) have no completeness check, so nothing raises: the missing layers
    draft from empty weights."""
    method = ctx.report.request.speculative.get("method", "mtp")
    if method != "mtp" and (method not in _LAYER_COUNTED or ctx.inputs.separate_draft):
        return []  # an EAGLE/DFlash/DSpark head of its own or a draft model: no MTP depth to count
    cfg = ctx.inventory.config
    key, expected = mtp_layout.vllm_depth(cfg)
    err = ctx.load("draft").completeness_error
    fed = mtp_layout.depth_on_disk(ctx.fed("draft"), cfg)
    on_disk = mtp_layout.depth_on_disk(ctx.inventory.name_heads, cfg)
    shipped = max(fed, on_disk)
    if shipped >= expected and (err is None or _default_loader_check(err)):
        # Every layer is shipped: a parameter the default loader's start-up check finds
        # unloaded is one the layers' tensors do not reach (MTP005, MTP008 say why).
        return []
    declared = mtp_layout.depth_field(cfg)[1] is not None
    if err is not None:
        said = f"{err.type}: {err.message.rstrip('.')}"
    else:
        draft = ctx.report.models.get("draft")
        loader = draft.architecture if draft else "this MTP loader"
        quant = ctx.report.quant
        if quant is not None and (quant.draft_method or quant.method):
            # vLLM runs DefaultModelLoader.track_weights_loading only where the model config
            # names no quantization: the probe replays it the same way.
            why = (
                f"{loader} has no completeness check of its own, and vLLM's check for unloaded "
                f"weights is off for a {quant.draft_method or quant.method} model"
            )
        else:
            why = f"{loader} has no completeness check"
        said = f"nothing raised ({why}): the missing layers draft from uninitialized weights"
    return [
        Hit(
            key="mtp-depth",
            fields={
                "expected": expected if declared else f"{expected} (vLLM's default: config.json has no such key)",
                "found": shipped,
                "config_key": key,
                "error": said,
                "remedy": _remedy(key, shipped) if method == "mtp" else _DSPARK_REMEDY,
            },
            location=ctx.config_location(key),
            evidence={
                "vllm_frame": frame_json(err) if err else None,
                "vllm_error": said if err else None,
                "depth_vllm_builds": expected,
                "layers_fed_to_draft": fed,
                "layers_on_disk": on_disk,
                "layers_shipped": shipped,
                "draft_tensors_loaded": len(ctx.fed("draft")),
            },
            provides=[Cause("mtp-missing")],
            # The loader's own completeness check is what this finding quotes: the same error,
            # recorded as the draft's tensor-less load error, is no second root cause (MTP008).
            claims=[("load-error", "draft", e.tensor) for e in _same_error(ctx, err)],
            # The depth field does not size a DSpark drafter (vLLM 0.33.0 builds
            # `n_mtp_layers` or 3 stages): set-mtp-depth would change nothing it reads.
            artifact_fixes=None if method == "mtp" else [],
        )
    ]


_DSPARK_REMEDY = (
    "the checkpoint lacks DSpark stages the drafter is built with: use an export that keeps the `mtp.*` "
    "stages (or restore them from the original), or serve without --speculative-config"
)


def _same_error(ctx: Context, err: ErrorRecord | None) -> list[LoadError]:
    """The draft's tensor-less load errors that are the completeness error `err` itself."""
    if err is None:
        return []
    return [
        e for _m, e in ctx.load_errors("draft") if e.tensor is None and (e.type, e.message) == (err.type, err.message)
    ]


def _default_loader_check(err: ErrorRecord) -> bool:
    """vLLM's `DefaultModelLoader.track_weights_loading` raised it (any unloaded parameter),
    not an MTP loader's own layer check."""
    return err.frame is not None and err.frame.function == "track_weights_loading"


def _remedy(key: str, shipped: int) -> str:
    if shipped:
        return f"set {key} to {shipped} (`mtplint fix --only set-mtp-depth`), or restore the missing layers"
    return (
        "the checkpoint ships no MTP layer: use an export that keeps the MTP tensors (or restore them from "
        f"the original), or serve without --speculative-config; {key} = 0 (`set-mtp-depth`) stops advertising MTP"
    )


@check(fields=("model", "tensor", "error_type", "error", "frame"))
def load_error_unexplained(ctx: Context, options: None) -> list[Hit]:
    groups: dict[tuple[str, str, str], list[LoadError]] = defaultdict(list)
    for model, err in ctx.load_errors():
        if ctx.claimed("load-error", model, err.tensor):
            continue
        where = f"{err.frame.file}:{err.frame.line}" if err.frame else "None:None"
        groups[(model, err.type, where)].append(err)
    n_hidden = mtp_layout.num_hidden_layers(ctx.inventory.config)
    hits = []
    for (model, etype, where), errs in groups.items():
        first = errs[0]
        # MTP tensors that fail to load (a Qwen3.5 block under `model.language_model.mtp.*`
        # reaches the target's loader, never the draft's): the draft's empty parameters are
        # the consequence.
        mtp_failed = any(e.tensor and mtp_layout.is_mtp_name(e.tensor, n_hidden) for e in errs)
        # A draft loader that raises outside any tensor (a separate DSpark draft without the
        # `d2t` its reduced vocabulary needs) aborts the whole load: every parameter it leaves
        # empty is its consequence too.
        mtp_failed = mtp_failed or (model == "draft" and any(e.tensor is None for e in errs))
        hits.append(
            Hit(
                key=f"{model}:{first.tensor}",
                fields={
                    "model": model,
                    "tensor": first.tensor or "no single tensor (the loader raised on its own)",
                    "error_type": etype,
                    "error": first.message,
                    "frame": where,
                },
                location=Location(file=ctx.tensor_file(first.tensor), tensor=first.tensor),
                evidence={
                    "failed_tensors": len(errs),
                    "examples": [e.tensor for e in errs[:5]],
                    "vllm_frame": frame_json(first),
                },
                provides=[Cause("mtp-missing")] if mtp_failed else [],
            )
        )
    return hits
