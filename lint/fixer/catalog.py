"""Artifact-side fixes (`mtplint fix PATH --only ID`): id -> fix.

Which rules a fix resolves is declared once, in the rule files' `[fixes] artifact`; every id
declared there is registered here and every fix registered here is declared by a rule
(tests/fixer/test_fixer.py holds the two to each other).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..probe.report import ProbeReport
from . import alias_head_embed, ignore_expert_blocks, ignore_mtp_block, index_shards, mtp_depth, rewrite_ignore
from .plan import Change, PlanOptions

# plan(inventory, report, findings, *, options=None) -> list[Change]
PlanFn = Callable[..., list[Change]]


@dataclass(frozen=True)
class Fix:
    id: str
    summary: str
    plan: PlanFn

    def plan_for(
        self, inventory: Any, report: ProbeReport, findings: list[Any], options: PlanOptions | None = None
    ) -> list[Change]:
        return self.plan(inventory, report, findings, options=options or PlanOptions())


# Registry order is plan order: the layer-wide entries of rewrite-ignore-to-runtime-names
# come first, so the exact names ignore-unquantized-mtp-block would add are skipped as covered.
FIXES: dict[str, Fix] = {
    f.id: f
    for f in (
        Fix(
            rewrite_ignore.ID,
            "add the runtime-namespace entries a dead exclusion entry meant (keeps the original unless --drop-dead)",
            rewrite_ignore.plan,
        ),
        Fix(
            ignore_expert_blocks.ID,
            "where a config compares its list with one on-disk name per block (DeepseekV4FP8Config's "
            "`ignore`): write that name into the list in place of the dead entries that miss it",
            ignore_expert_blocks.plan,
        ),
        Fix(
            ignore_mtp_block.ID,
            "exclude the draft modules vLLM builds quantized but the checkpoint stores unquantized, or does not "
            "store at all where the proposer shares the target's (an MTP head)",
            ignore_mtp_block.plan,
        ),
        Fix(
            alias_head_embed.ID,
            "DeepSeek-V4: add mtp.{i}.head.weight / mtp.{i}.emb.tok_emb.weight copies of the top-level "
            "head/embed in one new shard",
            alias_head_embed.plan,
        ),
        Fix(
            index_shards.ID,
            "add the tensors of shards the index never names (a sidecar mtp.safetensors) to its weight_map",
            index_shards.plan,
        ),
        Fix(
            mtp_depth.ID,
            "set the config's MTP depth to the MTP layers on disk (0 disables MTP)",
            mtp_depth.plan,
        ),
    )
}
