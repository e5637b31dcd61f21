"""Checks over the dry-run load as a whole: MTP layers missing, load errors no other rule explains."""

from __future__ import annotations

from collections import defaultdict

from .. import mtp_layout
from ..findings import Location
from ..probe.report import LoadError
from . import check
from .context import Cause, Context, Hit, frame_json


@check(fields=("config_key", "expected", "found", "error"))
def mtp_layers_missing(ctx: Context, options: None) -> list[Hit]:
    err = ctx.load("draft").completeness_error
    if not err:
        return []
    cfg = ctx.inventory.config
    key, expected = mtp_layout.depth_field(cfg)
    draft_fed = ctx.fed("draft")
    return [
        Hit(
            key="mtp-depth",
            fields={
                "expected": expected,
                "found": len(mtp_layout.layers_present(draft_fed, mtp_layout.num_hidden_layers(cfg))),
                "config_key": key,
                "error": f"{err.type}: {err.message}",
            },
            location=ctx.config_location(key),
            evidence={"vllm_frame": frame_json(err), "draft_tensors_loaded": len(draft_fed)},
            provides=[Cause("mtp-missing")],
        )
    ]


@check(fields=("model", "tensor", "error_type", "error", "frame"))
def load_error_unexplained(ctx: Context, options: None) -> list[Hit]:
    groups: dict[tuple[str, str, str], list[LoadError]] = defaultdict(list)
    for model, err in ctx.load_errors():
        if ctx.claimed("load-error", model, err.tensor):
            continue
        where = f"{err.frame.file}:{err.frame.line}" if err.frame else "None:None"
        groups[(model, err.type, where)].append(err)
    hits = []
    for (model, etype, where), errs in groups.items():
        first = errs[0]
        hits.append(
            Hit(
                key=f"{model}:{first.tensor}",
                fields={
                    "model": model,
                    "tensor": first.tensor,
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
            )
        )
    return hits
