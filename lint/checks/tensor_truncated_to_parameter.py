"""Checkpoint tensors a weight loader narrow()ed to a smaller parameter: vLLM's linear loaders
take `loaded_weight.narrow(dim, rank * shard, shard)` before their shape assert, so a tensor
larger than the parameter it feeds (a config that under-states `num_key_value_heads`,
`head_dim` or an intermediate size) loads its first rows and drops the rest, without an error.
The probe counts the elements each tensor's loading copied into parameters (dry run,
LoadResult.truncated): what a rank holds is at least 1/TP of a sharded tensor, all of a
replicated one; less is what vLLM dropped."""

from __future__ import annotations

import re
from collections import defaultdict

from ..core.findings import Location
from ..probe.report import MODELS, Model
from . import check
from .context import Cause, Context, Hit

_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")


@check(fields=("count", "pattern", "example", "shape", "params", "kept", "tp", "vllm_version"))
def tensor_truncated_to_parameter(ctx: Context, options: None) -> list[Hit]:
    """One hit per tensor name pattern (layer and expert indices generalized), over both models."""
    truncated: dict[str, tuple[Model, list[int]]] = {}
    for model in MODELS:
        if model in ctx.report.load:
            for tensor, counts in ctx.load(model).truncated.items():
                truncated.setdefault(tensor, (model, counts))
    if not truncated:
        return []
    groups: dict[str, list[str]] = defaultdict(list)
    for tensor in truncated:
        groups[_INDEX.sub("N", tensor)].append(tensor)
    tp = ctx.report.request.tensor_parallel_size
    hits = []
    for pattern, names in sorted(groups.items()):
        example = names[0]
        model, (copied, numel) = truncated[example]
        info = ctx.inventory.tensors.get(example)
        params = ctx.fed(model).get(example, [])
        hits.append(
            Hit(
                key=f"truncated:{pattern}",
                fields={
                    "count": len(names),
                    "pattern": pattern,
                    "example": example,
                    "shape": list(info.shape) if info else "?",
                    "params": ", ".join(_param_shapes(ctx, model, params)) or "its parameter",
                    "kept": f"{copied:,} of its {numel:,} elements ({100 * copied / numel:.0f}%)",
                    "tp": tp,
                    "vllm_version": ctx.vllm_version,
                },
                location=Location(file=ctx.tensor_file(example), tensor=example),
                evidence={
                    "model": model,
                    "tensors": sorted(names)[:8],
                    "elements_copied_on_rank_0": copied,
                    "elements_on_disk": numel,
                    "params": params,
                },
                # A float tensor copied into a packed quantized parameter (MTP002's silent
                # load) is narrowed too: there the format, not a size in config.json, is wrong.
                because=[Cause("quant-mismatch", (model, p.rsplit(".", 1)[0])) for p in params],
            )
        )
    return hits


def _param_shapes(ctx: Context, model: str, params: list[str]) -> list[str]:
    shapes = ctx.params(model)
    return [f"{p} {shapes[p].shape}" if p in shapes else p for p in params[:2]]
