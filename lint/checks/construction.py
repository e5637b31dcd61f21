"""Checks on whether vLLM could build the models at all."""

from __future__ import annotations

import re

from ..probe.report import ErrorRecord
from ..view.report_view import frame_json
from . import check
from .context import Context, Hit

_DIVISIBILITY = re.compile(r"(\w+) = (\d+) is not divisible by (?:weight quantization )?(\w+) = (\d+)")


def _frame(err: ErrorRecord) -> str:
    f = err.frame
    return f"{f.file}:{f.line} in {f.function}" if f else "unknown frame"


@check(fields=("module", "dim", "size", "tp", "block"))
def tp_block_divisibility(ctx: Context, options: None) -> list[Hit]:
    hits = []
    for model, err in ctx.construction_errors():
        m = _DIVISIBILITY.search(err.message)
        if not m:
            continue
        hits.append(
            Hit(
                key=f"{model}:{m.group(1)}",
                fields={
                    "module": model,
                    "dim": m.group(1),
                    "size": m.group(2),
                    "tp": ctx.inputs.tensor_parallel_size,
                    "block": m.group(4),
                },
                location=ctx.config_location("quantization_config"),
                evidence={"error": err.message, "frame": _frame(err)},
                claims=[("construction-error", model, None)],
            )
        )
    return hits


# compressed-tensors' matcher in vLLM 0.20 names the layer it could not place; an empty
# name is a layer constructed without prefix=.
_UNMATCHED_LAYER = re.compile(r"Unable to find matching target for (\S*) in the compressed-tensors config")


def _no_mtp_family(ctx: Context, message: str) -> bool:
    """vLLM asked for the target's own MTP block where its architecture has none (Llama, a
    target of separate EAGLE drafts): `Unsupported speculative method: 'mtp'`."""
    return "Unsupported speculative method: 'mtp'" in message and not ctx.inputs.separate_draft


# How vLLM's messages name a GPU-only package the probe environment may lack.
_PACKAGE_NAMES = {"flashinfer": "FlashInfer"}


def _absent_package_named(ctx: Context, message: str) -> str | None:
    """The GPU-only package (absent from the probe's interpreter) a construction error names:
    vLLM refused a kernel backend because the package is not installed here, which says
    nothing about the checkpoint (a GPU box has vLLM's pinned build, whose kernels this
    machine cannot inspect)."""
    for package in ctx.report.absent_gpu_packages:
        if _PACKAGE_NAMES.get(package, package) in message or f"No module named '{package}" in message:
            return package
    return None


def _one_line(message: str) -> str:
    # pydantic's and vLLM's multi-line messages ("1 validation error for SpeculativeConfig\n  Value
    # error, ...") read as one sentence in a finding; the probe report keeps them as raised.
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


@check(fields=("failed", "model", "error_type", "error", "frame", "module"))
def construction_failed(ctx: Context, options: None) -> list[Hit]:
    hits = []
    for model, err in ctx.construction_errors():
        if ctx.claimed("construction-error", model, None):
            continue
        layer = _UNMATCHED_LAYER.search(err.message)
        # "config": vLLM's config classes (VllmConfig, SpeculativeConfig) refused the inputs
        # before any model was built; no model is named in that case.
        failed = (
            "vLLM's config validation rejects these inputs (no model was built)"
            if model == "config"
            else f"vLLM cannot construct the {model} model"
        )
        if model == "config" and _no_mtp_family(ctx, err.message):
            failed = (
                "vLLM's config validation rejects these inputs (no model was built; the architecture has no "
                "MTP draft in this vLLM: lint a draft shipped as its own checkpoint with `--draft PATH`)"
            )
        absent = _absent_package_named(ctx, err.message)
        if absent is not None:
            failed = (
                f"vLLM cannot construct the {model} model in the probe's environment, which has no "
                f"{_PACKAGE_NAMES.get(absent, absent)} ({absent}, a GPU-only package vLLM pins): on the GPU box "
                "this depends on its installed build, not on the checkpoint, and the rules that need "
                "the model could not run"
            )
        hits.append(
            Hit(
                key=model,
                fields={
                    "failed": failed,
                    "model": model,
                    "error_type": err.type,
                    "error": _one_line(err.message),
                    "frame": _frame(err),
                    "module": layer.group(1) if layer else None,
                },
                location=ctx.config_location(),
                evidence={
                    "model": model,
                    "frame": frame_json(err),
                    **({"layer_prefix": layer.group(1)} if layer else {}),
                    **({"absent_package": absent} if absent else {}),
                },
                severity="warning" if absent else None,
            )
        )
    return hits
