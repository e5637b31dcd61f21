"""What the index leaves out: shards next to model.safetensors.index.json that its weight_map never
names. vLLM loads only the shards the index names (filter_duplicate_safetensors_files), so their
tensors never reach load_weights; the probe, fed what vLLM loads, cannot see them either."""

from __future__ import annotations

from ..core.findings import Location
from ..core.mtp_layout import is_mtp_name, num_hidden_layers
from . import check
from .context import Cause, Context, Hit

_EXAMPLES = 8


@check(fields=("shard", "count", "mtp_count", "example", "index_note"), fixes=("index-unindexed-shards",))
def shards_outside_the_index(ctx: Context, options: None) -> list[Hit]:
    """One hit per shard in the inventory's `unindexed` (read from the listing and the shard headers,
    with or without a probe). An MTP-looking shard stands for the draft's empty parameters."""
    inv = ctx.inventory
    if inv.index_path is None or not inv.unindexed:
        return []
    n_hidden = num_hidden_layers(inv.config)
    others = ", ".join(inv.other_indexes)
    hits: list[Hit] = []
    for shard, tensors in sorted(inv.unindexed.items()):
        names = sorted(t.name for t in tensors or ())
        mtp = [n for n in names if is_mtp_name(n, n_hidden)]
        hits.append(
            Hit(
                key=shard,
                fields={
                    "shard": shard,
                    "count": len(names) if tensors is not None else "unreadable",
                    "mtp_count": len(mtp),
                    "example": (mtp or names or ["(no tensor)"])[0],
                    "index_note": f"; it is listed only in {others}, which vLLM never reads" if others else "",
                },
                location=Location(file=shard),
                evidence={
                    "tensors": len(names),
                    "mtp_tensors": len(mtp),
                    "examples": (mtp or names)[:_EXAMPLES],
                    "bytes": sum(t.nbytes for t in tensors or ()),
                    "header_readable": tensors is not None,
                    "other_indexes": list(inv.other_indexes),
                    "index": inv.index_path.name,
                },
                # Added to the index, the tensors load; an unreadable shard needs a new export.
                artifact_fixes=["index-unindexed-shards"] if tensors else [],
                # The MTP layer it holds is what the draft's never-loaded parameters lack.
                provides=[Cause("mtp-missing")] if mtp else [],
                severity=None if mtp else "warning",
            )
        )
    return hits
