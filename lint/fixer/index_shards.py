"""index-unindexed-shards (MTP015): name the tensors of shards the index leaves out in its weight_map.

An exporter that writes the MTP layer to a sidecar file (mtp.safetensors, with or without its own
mtp.safetensors.index.json) leaves model.safetensors.index.json without it, and vLLM loads only the
shards that index names. The tensors are already on disk: adding them to the weight_map (and their
bytes to metadata.total_size, settled by plan.render) is the whole fix; no shard is written.
"""

from __future__ import annotations

from typing import Any

from ..core.findings import Finding
from ..inventory.model import Inventory, TensorInfo
from ..probe.report import ProbeReport
from .plan import INDEX_NAME, Change, PlanOptions

ID = "index-unindexed-shards"


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    shards = [f.location.file for f in findings if ID in f.fixes.artifact]
    if inventory.index_path is None or not shards:
        return []
    named = set(inventory.tensors)
    adding: dict[str, TensorInfo] = {}
    notes: list[str] = []
    for shard in shards:
        tensors = inventory.unindexed.get(shard)
        if not tensors:
            notes.append(f"{shard}: its header cannot be read; export it again")
            continue
        clash = sorted(t.name for t in tensors if t.name in named or t.name in adding)
        if clash:
            notes.append(f"{shard}: {len(clash)} tensor(s) already named elsewhere left as they are (e.g. {clash[0]})")
        adding.update((t.name, t) for t in tensors if t.name not in named and t.name not in adding)
    if not adding:
        return []

    def edit(doc: dict[str, Any]) -> None:
        wm = doc.setdefault("weight_map", {})
        for name in sorted(adding):
            wm[name] = adding[name].file

    files = sorted({t.file for t in adding.values()})
    return [
        Change(
            fix=ID,
            file=INDEX_NAME,
            edit=edit,
            notes=notes,
            tensor_bytes={n: t.nbytes for n, t in adding.items()},
            summary=f"{INDEX_NAME}: weight_map += {len(adding)} tensors of {', '.join(files)}",
        )
    ]
