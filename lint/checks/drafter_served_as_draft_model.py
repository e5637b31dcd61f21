"""A drafter head that vLLM serves as an independent draft model: the method vLLM resolved
(recorded by the probe) against the drafter the draft's architecture is built for."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from . import check
from .context import Cause, Context, Hit


@dataclass(frozen=True)
class DrafterOptions:
    # [pattern, method] pairs on config.json's architectures, first match wins.
    drafters: list[list[str]] = field(default_factory=list)


@check(fields=("vllm_version", "why", "architecture", "method"), options=DrafterOptions)
def drafter_served_as_draft_model(ctx: Context, options: DrafterOptions) -> list[Hit]:
    if not ctx.inputs.separate_draft or (ctx.report.request.speculative or {}).get("method") != "draft_model":
        return []
    archs = [a for a in ctx.inventory.config.get("architectures") or [] if isinstance(a, str)]
    for arch in archs:
        method = next((m for pattern, m in options.drafters if fnmatch.fnmatchcase(arch, pattern)), None)
        if method is None:
            continue
        name = str(ctx.inputs.path or "")
        return [
            Hit(
                key=arch,
                fields={
                    "vllm_version": ctx.vllm_version,
                    "why": f"the model as given, {name!r}, names none of eagle-, eagle3, dflash, dspark",
                    "architecture": arch,
                    "method": method,
                },
                location=ctx.config_location("architectures"),
                evidence={"resolved_method": "draft_model", "architectures": archs, "model_as_given": name},
                provides=[Cause("draft-method")],
            )
        ]
    return []
