"""alias-mtp-head-embed (MTP004): the seed-003 workaround for DeepSeek-V4.

DeepSeekV4MTP.load_weights routes only `mtp.{i}.*` keys; a checkpoint whose `head.weight` /
`embed.weight` exist only at the top level leaves the draft's shared_head.head /
embed_tokens unloaded wherever the proposer does not share them (e.g. pipeline
parallelism). Copies under `mtp.{i}.head.weight` and `mtp.{i}.emb.tok_emb.weight`, in one
new shard, give the loader keys it routes. The existing shards are never touched.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import BadInput
from ..core.findings import Finding
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .plan import INDEX_NAME, Change, NewTensor, PlanOptions

ID = "alias-mtp-head-embed"
SHARD = "model-mtp-aliases.safetensors"
# (top-level source, alias under mtp.{i}.) as DeepSeekV4MTP.load_weights maps them.
ALIASES = (("head.weight", "head.weight"), ("embed.weight", "emb.tok_emb.weight"))
_MTP_LAYER = re.compile(r"^mtp\.(\d+)\.")


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    if not any(ID in f.fixes.artifact for f in findings):
        return []
    if not str(inventory.config.get("model_type", "")).startswith("deepseek_v4"):
        return []  # other families name their MTP head/embedding differently
    new = _alias_tensors(inventory)
    if not new:
        return []
    if SHARD in inventory.shards:
        raise BadInput(
            f"{SHARD} is already part of the checkpoint but lacks "
            f"{', '.join(t.name for t in new)}; remove it from the index and re-run",
            path=str(inventory.root / SHARD),
        )
    total = sum(t.nbytes for t in new)
    names = ", ".join(t.name for t in new)
    shard = Change(
        fix=ID,
        file=SHARD,
        tensors=new,
        summary=f"new shard {SHARD}: {names} ({total / 2**30:.2f} GiB copied from "
        f"{', '.join(sorted({t.source_file for t in new}))})",
    )
    return [shard, _index_change(inventory, new)]


def _alias_tensors(inventory: Inventory) -> list[NewTensor]:
    """The aliases missing under each MTP layer on disk, copied from the top-level tensors."""
    layers = sorted({int(m.group(1)) for n in inventory.tensors if (m := _MTP_LAYER.match(n))})
    new: list[NewTensor] = []
    for i in layers:
        for src, alias in ALIASES:
            name = f"mtp.{i}.{alias}"
            t = inventory.tensors.get(src)
            if t is None or name in inventory.tensors:
                continue
            new.append(
                NewTensor(
                    name=name, dtype=t.dtype, shape=t.shape, source_file=t.file, source_begin=t.begin, source_end=t.end
                )
            )
    return new


def _index_change(inventory: Inventory, new: list[NewTensor]) -> Change:
    """The index entries mapping the aliases to the new shard: an edit of the checkpoint's
    index, or a new index where it has none."""
    if inventory.index_path is not None:

        def edit(doc: dict[str, Any]) -> None:
            wm = doc.setdefault("weight_map", {})
            wm.update({t.name: SHARD for t in new})

        return Change(
            fix=ID,
            file=INDEX_NAME,
            edit=edit,
            tensor_bytes={t.name: t.nbytes for t in new},
            summary=f"{INDEX_NAME}: map {len(new)} alias tensor(s) to {SHARD}",
        )
    # Single-file checkpoints: an index makes loaders that need one for several files
    # (transformers) find the new shard; vLLM globs *.safetensors either way.
    existing = {n: t.file for n, t in inventory.tensors.items()}

    def create(doc: dict[str, Any]) -> None:
        doc["metadata"] = {"total_size": 0}
        doc["weight_map"] = {**existing, **{t.name: SHARD for t in new}}

    return Change(
        fix=ID,
        file=INDEX_NAME,
        edit=create,
        create=True,
        tensor_bytes={**{n: t.nbytes for n, t in inventory.tensors.items()}, **{t.name: t.nbytes for t in new}},
        summary=f"{INDEX_NAME}: new index over {len(inventory.shards)} shard(s) + {SHARD}",
    )
