"""Checks of how a loader shards a checkpoint tensor across tensor-parallel ranks.

The probe dry-runs one rank on meta tensors: a slice of the right shape loads without an
error whichever rows it holds, so which rows a loader hands each rank comes from a knowledge
table of the loaders that split a fused tensor evenly; the probe supplies the draft class
vLLM built, the TP it was built for, which on-disk tensor fed which parameter, and the
parameter's per-rank shape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.findings import Location
from ..core.versions import in_range
from ..inventory.model import TensorInfo
from . import check
from .context import Context, Hit
from .knowledge import require_columns

_SPLIT_KEYS = {"id", "vllm", "draft_classes", "tensor", "function", "source", "geometry"}


@dataclass(frozen=True)
class SplitOptions:
    # The knowledge table: loaders of a vLLM range that give rank r the r-th even slice of a
    # fused on-disk QKV tensor, and the on-disk forms they split Q/K/V-aware instead.
    splits: list[dict[str, Any]] = field(default_factory=list)
    # On-disk forms stored pre-sharded in `chunks` [Q_c | K_c | V_c] pieces (a config key):
    # an even split at TP == chunks is exact when the block scales are tiled per chunk.
    presharded: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        require_columns("splits", self.splits, _SPLIT_KEYS)
        require_columns("presharded", self.presharded, {"weight_dtype", "scale", "chunks"})


def _is_form(ctx: Context, tensor: str, info: TensorInfo, form: dict[str, Any]) -> bool:
    """The tensor is a weight of `form`: its dtype, with the scale sibling on disk."""
    module = tensor.rpartition(".")[0]
    return info.dtype == form["weight_dtype"] and f"{module}.{form['scale']}" in ctx.inventory.tensors


def _presharded_exact(ctx: Context, tensor: str, info: TensorInfo, tp: int, forms: list[dict[str, Any]]) -> bool:
    """An even split that hands each rank exactly one pre-sharded chunk, scales included."""
    if _presharded_chunks(ctx, tensor, info, forms) != tp or info.shape[0] % tp:
        return False
    block = ((ctx.inventory.config.get("quantization_config") or {}).get("weight_block_size") or [128])[0]
    scale_names = {f"{tensor.rpartition('.')[0]}.{form['scale']}" for form in forms}
    scales = [ctx.inventory.tensors[n] for n in scale_names if n in ctx.inventory.tensors]
    return any(s.shape[0] == tp * -(-(info.shape[0] // tp) // block) for s in scales)


def _presharded_chunks(ctx: Context, tensor: str, info: TensorInfo, forms: list[dict[str, Any]]) -> int | None:
    """The chunk count of a pre-sharded on-disk form, where the tensor is one."""
    config = ctx.report.draft_hf_config or ctx.inventory.config
    for form in forms:
        if _is_form(ctx, tensor, info, form) and isinstance(config.get(form["chunks"]), int):
            return int(config[form["chunks"]])
    return None


def _geometry(ctx: Context, keys: dict[str, str]) -> tuple[int, int, int] | None:
    """Q, K and V rows of the fused projection, from the draft config keys its constructor
    reads (V heads default to the head size, as MiMoV2Attention's `v_head_dim` does)."""
    config = ctx.report.draft_hf_config or {}
    heads, kv_heads, head_dim = (config.get(keys[k]) for k in ("heads", "kv_heads", "head_dim"))
    v_dim = config.get(keys.get("v_head_dim", "")) or head_dim
    if isinstance(heads, int) and isinstance(kv_heads, int) and isinstance(head_dim, int) and isinstance(v_dim, int):
        return heads * head_dim, kv_heads * head_dim, kv_heads * v_dim
    return None


def _rank_rows(q: int, k: int, v: int, tp: int, rank: int) -> dict[str, str]:
    """What the even slice puts in each slot of `rank` (KV heads split, not replicated: the
    slice has the parameter's shape): slot -> the on-disk rows it gets."""
    per_rank = (q + k + v) // tp
    start, out = rank * per_rank, {}
    for slot, size in (("Q", q // tp), ("K", k // tp), ("V", v // tp)):
        end = start + size
        parts = [
            name
            for name, (a, b) in (("Q", (0, q)), ("K", (q, q + k)), ("V", (q + k, q + k + v)))
            if start < b and end > a
        ]
        out[slot] = f"rows {start}-{end - 1} ({' + '.join(parts)})"
        start = end
    return out


def _split_evenly(ctx: Context, row: dict[str, Any], options: SplitOptions, tp: int) -> list[str]:
    """The on-disk tensors of `row`'s form the draft's load fed, at 1/TP of their rows each,
    into the parameter of the same name, whose even slice is not exact."""
    pattern = re.compile(row["tensor"])
    params = ctx.params("draft")
    split: list[str] = []
    for tensor, fed in sorted(ctx.fed("draft").items()):
        info = ctx.inventory.tensors.get(tensor)
        param = params.get(tensor) if tensor in fed else None
        # An uneven slice raises in default_weight_loader (a load error, MTP008's).
        if info is None or param is None or not pattern.search(tensor) or param.shape[0] * tp != info.shape[0]:
            continue
        if row.get("qkv_aware") and _is_form(ctx, tensor, info, row["qkv_aware"]):
            continue
        if not _presharded_exact(ctx, tensor, info, tp, options.presharded):
            split.append(tensor)
    return split


def _evidence(ctx: Context, row: dict[str, Any], options: SplitOptions, split: list[str], tp: int) -> dict[str, Any]:
    first = split[0]
    info = ctx.inventory.tensors[first]
    evidence: dict[str, Any] = {
        "tensors": split[:8],
        "tensors_count": len(split),
        "on_disk_shape": list(info.shape),
        "per_rank_shape": list(ctx.params("draft")[first].shape),
        "tensor_parallel_size": tp,
        "knowledge": {k: row[k] for k in ("id", "vllm", "function", "source", "fixed_in", "issue") if k in row},
    }
    geometry = _geometry(ctx, row["geometry"])
    chunks = _presharded_chunks(ctx, first, info, options.presharded)
    if geometry is not None and sum(geometry) == info.shape[0]:
        q, k, v = geometry
        evidence["qkv_rows"] = {"Q": q, "K": k, "V": v}
        if chunks is None:
            evidence["rank_slots"] = {str(r): _rank_rows(q, k, v, tp, r) for r in sorted({0, 1, tp - 1})}
    if chunks is not None:
        # Rank r's slice is whole or partial [Q_c | K_c | V_c] chunks; its slots want
        # [Q_a Q_b .. | K_a K_b .. | V_a V_b ..].
        evidence["presharded_chunks"] = chunks
    return evidence


@check(
    fields=("module", "tensor", "disk_dtype", "tp", "vllm_version", "function", "draft_class", "count"),
    options=SplitOptions,
)
def fused_qkv_split_evenly(ctx: Context, options: SplitOptions) -> list[Hit]:
    """For every fused on-disk QKV tensor the draft's dry-run load fed into the parameter of
    the same name, on a vLLM whose loader (the knowledge row, for the draft class vLLM built)
    splits that form evenly: fires at TP > 1 unless the slice is exact (a pre-sharded form
    at TP == its chunk count)."""
    tp = ctx.report.request.tensor_parallel_size
    draft = ctx.report.models.get("draft")
    if tp <= 1 or draft is None or not draft.model_class or not ctx.built_ok("draft"):
        return []
    draft_class = draft.model_class.rsplit(".", 1)[-1]
    hits: list[Hit] = []
    for row in options.splits:
        if (
            draft_class not in row["draft_classes"]
            or not in_range(ctx.vllm_version, row["vllm"])
            or row["function"] in ctx.replaced_functions()
        ):
            continue
        split = _split_evenly(ctx, row, options, tp)
        if not split:
            continue
        first = split[0]
        evidence = _evidence(ctx, row, options, split, tp)
        hits.append(
            Hit(
                key=f"draft:{row['id']}",
                fields={
                    "module": first.rpartition(".")[0],
                    "tensor": first,
                    "disk_dtype": ctx.inventory.tensors[first].dtype,
                    "tp": tp,
                    "vllm_version": ctx.vllm_version,
                    "function": row["function"],
                    "draft_class": draft_class,
                    "count": len(split),
                },
                location=Location(file=ctx.tensor_file(first), tensor=first),
                evidence={**evidence, "draft_class": draft.model_class},
                basis="knowledge",
            )
        )
    return hits
