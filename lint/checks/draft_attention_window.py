"""A separate draft whose config declares sliding-window layers that the probed vLLM builds with
full attention: the draft's layer_types/sliding_window as the release's own config classes read
them (the probe records the draft's config) against the window vLLM's Attention layers of the
built draft resolved (the probe records each one).

A draft model class that does not pass `per_layer_sliding_window` leaves Attention to fall back to
`cache_config.sliding_window`, which comes from the target (speculators #684): Qwen3 EAGLE-3 drafts
before 0.26.0 (vllm #47568; read in the 0.24.0 and 0.25.1 sources), DFlash drafts before 0.25.1
(qwen3_dflash.py passes no per-layer window in the 0.20.2-0.24.0 sources). The release's own model
code decides here, no version table."""

from __future__ import annotations

import re
from typing import Any

from . import check
from .context import Context, Hit

_SLIDING = "sliding_attention"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@check(fields=("vllm_version", "ignored", "sliding", "layers", "window", "built"))
def draft_sliding_window_not_built(ctx: Context, options: None) -> list[Hit]:
    """Fires where a layer the draft's config declares `sliding_attention` is built by the probed
    release with another window (None: full attention)."""
    config = ctx.report.draft_hf_config
    built = ctx.report.draft_attention_windows
    if not ctx.inputs.separate_draft or config is None or not built:
        return []
    layer_types = config.get("layer_types")
    if not isinstance(layer_types, list) or _SLIDING not in layer_types:
        return []
    window = _declared_window(config)
    if window is None:
        return []  # no window to compare with (vLLM refuses such a DFlash draft itself)
    ordered = _by_layer(built)
    if len(ordered) != len(layer_types):
        return []  # layers vLLM built cannot be paired with the declared list one to one
    ignored = [
        (i, name, got)
        for i, ((name, got), declared) in enumerate(zip(ordered, layer_types, strict=True))
        if declared == _SLIDING and got != window
    ]
    if not ignored:
        return []
    builts = sorted({"full attention" if got is None else f"a {got}-token window" for _i, _n, got in ignored})
    return [
        Hit(
            key="layer_types",
            fields={
                "vllm_version": ctx.vllm_version,
                "ignored": len(ignored),
                "sliding": layer_types.count(_SLIDING),
                "layers": len(layer_types),
                "window": window,
                "built": " and ".join(builts),
            },
            location=ctx.config_location("layer_types"),
            evidence={
                "declared_layer_types": layer_types,
                "declared_sliding_window": window,
                "built_windows": {name: got for name, got in ordered},
                "not_built_as_declared": [name for _i, name, _got in ignored],
            },
        )
    ]


def _declared_window(config: dict[str, Any]) -> int | None:
    # DFlash drafts may carry their window in dflash_config (vLLM 0.33.0 qwen3_dflash.py
    # _resolve_layer_attention reads it before the top-level sliding_window).
    dflash = config.get("dflash_config")
    for value in (
        (dflash or {}).get("swa_window_size") if isinstance(dflash, dict) else None,
        config.get("sliding_window"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _by_layer(built: dict[str, int | None]) -> list[tuple[str, int | None]]:
    """The draft's attention layers in layer order (a draft's layers may be numbered after the
    target's: EAGLE-3 builds `model.layers.32` behind a 32-layer target)."""
    numbered = []
    for name, window in built.items():
        m = _LAYER.search(name)
        if m is None:
            return []
        numbered.append((int(m.group(1)), name, window))
    return [(name, window) for _n, name, window in sorted(numbered)]
