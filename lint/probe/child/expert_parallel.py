"""Expert parallelism as `vllm serve --enable-expert-parallel` lays it out: which experts each
rank of the EP group loads.

With EP each rank owns whole experts (EP size = DP x PCP x TP, vLLM's FusedMoEParallelConfig)
and its RoutedExperts weight loader turns away the others' tensors ("not local to this rank").
The probe builds rank 0 (its expert map is real CPU data: runtime_shim.computed_on_cpu); the
other ranks' experts are replayed on the same model by moving each layer to rank r with vLLM's
own `update_expert_map()` (its elastic-EP path) and feeding the experts that rank owns. A
tensor no rank reads is then one vLLM never loads, as without EP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

EXPERT_ID = re.compile(r"\.experts\.(\d+)\.")


@dataclasses.dataclass
class Layout:
    size: int
    layers: list[Any]  # the model's EP RoutedExperts layers
    owner: dict[int, int]  # global expert id -> the EP rank that loads it


def layout(model: Any) -> Layout | None:
    """The model's EP layout, or None without EP (or where this release cannot move a layer
    to another rank: every rank is then the one built)."""
    layers = [m for m in model.modules() if _is_ep_layer(m)]
    if not layers:
        return None
    size = layers[0].moe_config.moe_parallel_config.ep_size
    shapes = {(m.global_num_experts, m.moe_config.moe_parallel_config.ep_size) for m in layers}
    owner: dict[int, int] = {}
    if len(shapes) == 1:
        for rank in range(size):
            with at_rank(layers, rank):
                for gid in _local_experts(layers[0]):
                    owner.setdefault(gid, rank)
    return Layout(size=size, layers=layers, owner=owner)


def _is_ep_layer(module: Any) -> bool:
    # The layer holding the expert map (vLLM 0.33.0 RoutedExperts), not the runners that
    # forward to it.
    if "global_num_experts" not in vars(module) or "expert_map_manager" not in vars(module):
        return False
    cfg = getattr(getattr(module, "moe_config", None), "moe_parallel_config", None)
    return bool(getattr(cfg, "use_ep", False)) and callable(getattr(module, "update_expert_map", None))


def _local_experts(layer: Any) -> list[int]:
    expert_map = layer.expert_map_manager.expert_map
    if expert_map is None or expert_map.is_meta:
        return []
    return [i for i, local in enumerate(expert_map.tolist()) if local != -1]


@contextlib.contextmanager
def at_rank(layers: list[Any], rank: int) -> Iterator[None]:
    """Every EP layer as EP rank `rank` builds it (its expert map and local count), then back."""
    saved = [layer.moe_config.moe_parallel_config for layer in layers]
    try:
        for layer, cfg in zip(layers, saved, strict=True):
            layer.moe_config.moe_parallel_config = dataclasses.replace(cfg, ep_rank=rank)
            layer.update_expert_map()
        yield
    finally:
        for layer, cfg in zip(layers, saved, strict=True):
            layer.moe_config.moe_parallel_config = cfg
            layer.update_expert_map()


def owned_by(tensors: list[tuple[str, str, list[int]]], owner: dict[int, int], rank: int) -> list[int]:
    """Indexes of the per-expert tensors whose expert EP rank `rank` loads."""
    out = []
    for i, (name, _dtype, _shape) in enumerate(tensors):
        m = EXPERT_ID.search(name)
        if m and owner.get(int(m.group(1))) == rank:
            out.append(i)
    return out
