"""A hub fix's files over the repository's snapshot, as a checkpoint the re-lint can read.

A hub fix writes only small JSON files into --out; the shards stay on the hub. The re-lint reads
a private copy of the snapshot's small files with the fix's files written over them, and takes
the shard headers from the lint before (the same commit: nothing is fetched again).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from ..core.errors import BadInput
from ..inventory.checkpoint import load_over
from ..inventory.model import Inventory, TensorInfo


class KnownShards:
    """The shard headers an inventory already holds, served as a ShardSource."""

    def __init__(self, inventory: Inventory):
        self._headers: dict[str, dict[str, TensorInfo] | None] = {}
        for t in inventory.tensors.values():
            header = self._headers.setdefault(t.file, {})
            assert header is not None
            header[t.name] = t
        for shard, ts in inventory.unindexed.items():
            self._headers[shard] = None if ts is None else {t.name: t for t in ts}
        self._other = list(inventory.other_indexes)
        self._leftovers = list(inventory.fix_leftovers)
        self._origin = inventory.origin or str(inventory.root)

    def listing(self) -> set[str]:
        return set(self._headers)

    def other_indexes(self) -> list[str]:
        return list(self._other)

    def fix_leftovers(self) -> list[str]:
        return list(self._leftovers)

    def where(self, name: str) -> str:
        return f"{self._origin}/{name}"

    def check_fetched(self, names: list[str]) -> None:
        """Headers already read are there."""

    def headers(self, names: list[str], strict: bool = True) -> Iterator[tuple[str, dict[str, TensorInfo] | None]]:
        for name in names:
            header = self._headers.get(name)
            if header is None and strict:
                raise BadInput("its header could not be read", path=self.where(name))
            yield name, header


def copy_small_files(snapshot: Path, dest: Path) -> None:
    """The snapshot's files (huggingface_hub links them into its blob store) as plain copies."""
    for p in snapshot.iterdir():
        if p.is_file():
            shutil.copyfile(p, dest / p.name)


def overlay_inventory(before: Inventory, overlay: Path) -> Inventory:
    return load_over(overlay, KnownShards(before), before.origin)
