"""set-mtp-depth (MTP006): make the config's MTP depth match the MTP layers on disk.

Quantizers that drop the MTP block copy config.json with its depth field intact, so the
artifact advertises layers it lacks. Depth 0 is the honest value for a checkpoint that
ships none: vLLM then refuses `--speculative-config method=mtp` up front instead of
failing after loading the whole target.
"""

from __future__ import annotations

import re
from typing import Any

from ..findings import Finding
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .plan import Change, get_key, set_key

ID = "set-mtp-depth"
CONFIG = "config.json"


def mtp_layers_on_disk(inventory: Inventory) -> int:
    """MTP layers present, counted as the family loaders name them: `mtp.{i}.` (DeepSeek-V4),
    `mtp.layers.{i}.` (Qwen3.5), `model.layers.{N+i}.` (DeepSeek-V3, GLM). Only a
    contiguous run from 0 counts: loaders build layers 0..depth-1."""
    text = inventory.config.get("text_config")
    n = (text if isinstance(text, dict) and "num_hidden_layers" in text else inventory.config).get("num_hidden_layers")
    found: set[int] = set()
    pats = [re.compile(r"^(?:model\.)?(?:language_model\.)?mtp\.(?:layers\.)?(\d+)\.")]
    for name in inventory.tensors:
        for p in pats:
            if m := p.match(name):
                found.add(int(m.group(1)))
        layer = re.match(r"^(?:model\.)?(?:language_model\.)?layers\.(\d+)\.", name)
        if isinstance(n, int) and layer and int(layer.group(1)) >= n:
            found.add(int(layer.group(1)) - n)
    depth = 0
    while depth in found:
        depth += 1
    return depth


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: dict[str, Any] | None = None
) -> list[Change]:
    hits = [f for f in findings if ID in f.fixes.artifact]
    if not hits:
        return []
    key = hits[0].location.config_key or "num_nextn_predict_layers"
    old = get_key(inventory.config, key)
    depth = mtp_layers_on_disk(inventory)
    if old == depth:
        return []

    def edit(doc: dict[str, Any]) -> None:
        set_key(doc, key, depth)

    notes, expects = [], {}
    if depth == 0:
        expects["MTP009"] = "depth 0: vLLM refuses --speculative-config method=mtp for this checkpoint"
        notes.append(
            "this checkpoint ships no MTP layer: depth 0 DISABLES MTP. Serve it without "
            "--speculative-config (vLLM 0.33.0 rejects method=mtp for it), or restore the "
            "MTP tensors from the original checkpoint instead of running this fix"
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
