"""Checks that the checkpoint's MTP slot holds the drafter the requested method builds."""

from __future__ import annotations

from ..engine.context import Context, Hit
from . import check


@check
def wrong_drafter_under_mtp(ctx: Context, options: dict) -> list[Hit]:
    """DSpark stages stored under `mtp.*` (DeepSeek-V4-Flash-0731, V4.1) loaded by the MTP
    draft: the draft's own loader fails on their names (the probe's evidence), and the
    config says which drafter the weights belong to."""
    markers = tuple(options.get("tensor_markers", ["main_proj", "markov_head", "confidence_head"]))
    config_keys = [
        k
        for k in options.get("config_keys", ["dspark_block_size", "dspark_target_layer_ids"])
        if k in ctx.inventory.config or k in (ctx.inventory.config.get("text_config") or {})
    ]
    errors = [
        e
        for e in ctx.load("draft").get("errors", [])
        if any(m in (e.get("tensor") or "") or m in e.get("message", "") for m in markers)
    ]
    if not errors:
        return []
    # Once the slot is known to hold DSpark stages, every load error of that slot is this.
    errors = [e for e in ctx.load("draft").get("errors", []) if (e.get("tensor") or "").startswith("mtp.")]
    for e in errors:
        ctx.explained.add(("draft", e.get("tensor")))
    ctx.causes["mtp-missing"] = "MTP012:dspark"  # the MTP draft's own parameters stay empty
    first = errors[0]
    return [
        Hit(
            key="dspark",
            fields={
                "drafter": "DSpark",
                "method": "mtp",
                "config_keys": ", ".join(config_keys) or "none",
                "error": f"{first['type']}: {first['message']}",
            },
            location=ctx.config_location(config_keys[0] if config_keys else None),
            evidence={
                "failed_tensors": len(errors),
                "examples": [e.get("tensor") for e in errors[:5]],
                "vllm_frame": first.get("frame"),
            },
        )
    ]
