"""set-mtp-depth (MTP006): make the config's MTP depth match the MTP layers on disk.

Quantizers that drop the MTP block copy config.json with its depth field intact, so the
artifact advertises layers it lacks. With some layers shipped, their count is the depth the
draft can run. With none, depth 0 stops the checkpoint advertising MTP: vLLM 0.33.0 then
stops at config validation when `--speculative-config method=mtp` is given (SpeculativeConfig
takes `num_speculative_tokens % n_predict` with n_predict 0) instead of drafting from empty
weights; restoring the MTP tensors is the better fix and the finding says so.
"""

from __future__ import annotations

from typing import Any

from ..core import mtp_layout
from ..core.findings import Finding
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .plan import Change, PlanOptions, get_key, set_key

ID = "set-mtp-depth"
CONFIG = "config.json"


def mtp_layers_on_disk(inventory: Inventory) -> int:
    """MTP layers present, as the family loaders name them (mtplint.core.mtp_layout); only a
    contiguous run from 0 counts: loaders build layers 0..depth-1."""
    return mtp_layout.depth_on_disk(inventory.tensors, inventory.config)


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    hits = [f for f in findings if ID in f.fixes.artifact]
    if not hits:
        return []
    key = hits[0].location.config_key or "num_nextn_predict_layers"
    old = get_key(inventory.config, key)
    # What MTP006 counted (fed to the draft, or on disk in any shard); the inventory's own
    # count where the finding does not carry one.
    shipped = hits[0].evidence.get("layers_shipped")
    depth = shipped if isinstance(shipped, int) else mtp_layers_on_disk(inventory)
    if old == depth:
        return []

    def edit(doc: dict[str, Any]) -> None:
        set_key(doc, key, depth)

    notes, expects = [], {}
    if depth == 0:
        expects["MTP009"] = "depth 0: vLLM refuses --speculative-config method=mtp for this checkpoint"
        notes.append(
            "this checkpoint ships no MTP layer: depth 0 DISABLES MTP. Serve it without "
            "--speculative-config (vLLM 0.33.0 stops at config validation for method=mtp), or "
            "restore the MTP tensors from the original checkpoint instead of running this fix"
        )
    return [
        Change(
            fix=ID,
            file=CONFIG,
            edit=edit,
            notes=notes,
            expects=expects,
            summary=f"{CONFIG}:{key}: {old} -> {depth} (MTP layers on disk)",
        )
    ]
