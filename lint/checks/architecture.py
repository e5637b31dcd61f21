"""Checks that the checkpoint's MTP slot holds the drafter the requested method builds."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..view.report_view import frame_json
from . import check
from .context import Cause, Context, Hit


@dataclass(frozen=True)
class DrafterOptions:
    # Tensor-name markers of DSpark stages, and the config keys that declare a DSpark drafter.
    tensor_markers: list[str] = field(default_factory=lambda: ["main_proj", "markov_head", "confidence_head"])
    config_keys: list[str] = field(default_factory=lambda: ["dspark_block_size", "dspark_target_layer_ids"])


@check(fields=("drafter", "method", "config_keys", "error"), options=DrafterOptions)
def wrong_drafter_under_mtp(ctx: Context, options: DrafterOptions) -> list[Hit]:
    """DSpark stages stored under `mtp.*` (DeepSeek-V4-Flash-0731, V4.1) loaded by the MTP
    draft: the draft's own loader fails on their names (the probe's evidence), and the
    config says which drafter the weights belong to."""
    markers = tuple(options.tensor_markers)
    config_keys = [
        k
        for k in options.config_keys
        if k in ctx.inventory.config or k in (ctx.inventory.config.get("text_config") or {})
    ]
    errors = [e for _m, e in ctx.load_errors("draft") if any(m in (e.tensor or "") or m in e.message for m in markers)]
    if not errors:
        return []
    # Once the slot is known to hold DSpark stages, every load error of that slot is this.
    errors = [e for _m, e in ctx.load_errors("draft") if (e.tensor or "").startswith("mtp.")]
    first = errors[0]
    return [
        Hit(
            key="dspark",
            fields={
                "drafter": "DSpark",
                "method": "mtp",
                "config_keys": ", ".join(config_keys) or "none",
                "error": f"{first.type}: {first.message}",
            },
            location=ctx.config_location(config_keys[0] if config_keys else None),
            evidence={
                "failed_tensors": len(errors),
                "examples": [e.tensor for e in errors[:5]],
                "vllm_frame": frame_json(first),
            },
            provides=[Cause("mtp-missing")],  # the MTP draft's own parameters stay empty
            claims=[("load-error", "draft", e.tensor) for e in errors],
        )
    ]
