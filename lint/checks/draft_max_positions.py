"""A separate draft whose rotary cache is shorter than the context the deployment serves: the
max_position_embeddings the probed vLLM's own SpeculativeConfig left on the draft's config
(recorded by the probe) against --max-model-len, or the target's max positions without it.

The proposer hands a drafter that shares the target's positional space (EAGLE, EAGLE-3, DFlash,
DSpark) the target's positions, while get_rope sizes the draft's cos_sin_cache from its own
max_position_embeddings. vLLM raises the draft's value to the target's max_model_len itself
(SpeculativeConfig._maybe_override_draft_max_position_embeddings): for eagle/eagle3 since #49343
(merged after 0.25.1: from 0.26.0; read in the 0.27.1 and 0.29.0 sources), for every method but
draft_model in 0.33.0 (#57941). A release without it leaves the value as shipped, and the probe
records that."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import check
from .context import Context, Hit


@dataclass(frozen=True)
class MaxPositionsOptions:
    # RoPE types whose get_rope sizes the cache from max_position_embeddings alone (vLLM 0.33.0
    # config/speculative.py _CACHE_ONLY_ROPE_TYPES): others size it from
    # original_max_position_embeddings (yarn, deepseek) or derive frequencies from it, and
    # releases with the fix limit max_model_len to the draft's instead; those are not judged.
    cache_only_rope_types: list[str] = field(
        default_factory=lambda: ["default", "linear", "llama3", "ntk", "proportional"]
    )


_SIZE = re.compile(r"^(\d+)([kKmM]?)$")


@check(fields=("vllm_version", "draft_positions", "deployment", "served"), options=MaxPositionsOptions)
def draft_max_positions_below_deployment(ctx: Context, options: MaxPositionsOptions) -> list[Hit]:
    if not ctx.inputs.separate_draft or ctx.target is None or ctx.report.draft_hf_config is None:
        return []
    method = (ctx.report.request.speculative or {}).get("method") or ctx.inputs.method
    if method == "draft_model":
        return []  # an independent model: vLLM limits its max_model_len to its own instead
    positions = ctx.report.draft_hf_config.get("max_position_embeddings")
    if not isinstance(positions, int) or isinstance(positions, bool):
        return []
    served, source = _served_length(ctx)
    if served is None or positions >= served:
        return []
    rope_types = _rope_types(ctx.inventory.config)
    if not set(rope_types) <= set(options.cache_only_rope_types):
        return []
    return [
        Hit(
            key="max_position_embeddings",
            fields={
                "vllm_version": ctx.vllm_version,
                "draft_positions": positions,
                "deployment": source,
                "served": served,
            },
            location=ctx.config_location("max_position_embeddings"),
            evidence={
                "draft_max_position_embeddings_after_config": positions,
                "served_max_model_len": served,
                "served_from": source,
                "method": method,
                "rope_types": rope_types,
            },
        )
    ]


def _served_length(ctx: Context) -> tuple[int | None, str]:
    argv = list(ctx.report.request.serve_argv or [])
    for i, token in enumerate(argv):
        flag, eq, inline = token.partition("=")
        if flag in ("--max-model-len", "--max_model_len"):
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            size = _size(value)
            if size is not None:
                return size, f"--max-model-len {value}"
    assert ctx.target is not None
    config = ctx.target.config
    for holder in (config.get("text_config"), config):
        if isinstance(holder, dict) and isinstance(holder.get("max_position_embeddings"), int):
            return holder["max_position_embeddings"], "the target's max_position_embeddings (no --max-model-len)"
    return None, ""


def _size(value: str) -> int | None:
    # vLLM's parser takes 131072, 128k, 1m (powers of 1000 in lower case, 1024 in upper).
    m = _SIZE.match(value.strip())
    if not m:
        return None
    unit = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}[m.group(2)]
    return int(m.group(1)) * unit


def _rope_types(config: dict[str, Any]) -> list[str]:
    holders = [config, config.get("transformer_layer_config"), config.get("text_config")]
    types = []
    for holder in holders:
        if not isinstance(holder, dict):
            continue
        for key in ("rope_parameters", "rope_scaling"):
            params = holder.get(key)
            if isinstance(params, dict):
                # rope_parameters may hold one entry per attention type ({"full_attention": {...}}).
                entries = [p for p in params.values() if isinstance(p, dict)] or [params]
                types += [str(p.get("rope_type") or p.get("type") or "default") for p in entries]
    return sorted(set(types)) or ["default"]
