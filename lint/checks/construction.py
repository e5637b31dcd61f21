"""Checks on whether vLLM could build the models at all."""

from __future__ import annotations

import re

from ..engine.context import Context, Hit
from . import check

_DIVISIBILITY = re.compile(r"(\w+) = (\d+) is not divisible by (?:weight quantization )?(\w+) = (\d+)")


def _frame(err: dict) -> str:
    f = err.get("frame") or {}
    return f"{f.get('file')}:{f.get('line')} in {f.get('function')}" if f else "unknown frame"


def _construction_errors(ctx: Context) -> list[tuple[str, dict]]:
    out = [(model, err) for model, err in ctx.report.get("construction_errors", {}).items()]
    if ctx.report.get("config_error"):
        out.append(("config", ctx.report["config_error"]))
    return out


@check
def tp_block_divisibility(ctx: Context, options: dict) -> list[Hit]:
    hits = []
    for model, err in _construction_errors(ctx):
        m = _DIVISIBILITY.search(err.get("message", ""))
        if not m:
            continue
        ctx.explained.add((model, "<construction>"))
        hits.append(Hit(
            key=f"{model}:{m.group(1)}",
            fields={"module": model, "dim": m.group(1), "size": m.group(2),
                    "tp": ctx.inputs.get("tensor_parallel_size"), "block": m.group(4)},
            location=ctx.config_location("quantization_config"),
            evidence={"error": err.get("message"), "frame": _frame(err)},
        ))
    return hits


@check
def construction_failed(ctx: Context, options: dict) -> list[Hit]:
    hits = []
    for model, err in _construction_errors(ctx):
        if (model, "<construction>") in ctx.explained:
            continue
        hits.append(Hit(
            key=model,
            fields={"model": model, "error_type": err.get("type"), "error": err.get("message"),
                    "frame": _frame(err)},
            location=ctx.config_location(),
            evidence={"frame": err.get("frame")},
        ))
    return hits
