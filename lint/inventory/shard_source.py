"""Where shard headers come from. The inventory reads a listing and headers through this seam, so a
local directory and a hub repository (remote.HubShards, range requests) give the same inventory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from ..core.errors import BadInput
from .fix_files import held_here, is_fix_leftover
from .lfs import raise_for_pointers
from .model import TensorInfo
from .safetensors_header import read_header


class ShardSource(Protocol):
    def listing(self) -> set[str]:
        """The *.safetensors names vLLM's glob finds at the checkpoint's top level."""

    def other_indexes(self) -> list[str]:
        """*.safetensors.index.json files other than model.safetensors.index.json (vLLM reads none)."""

    def fix_leftovers(self) -> list[str]:
        """Top-level files an interrupted `mtplint fix` left (its lock, its temp files)."""

    def where(self, name: str) -> str:
        """How errors and reports name the file."""

    def check_fetched(self, names: list[str]) -> None:
        """BadInput when the shards' content is not there (Git LFS pointers)."""

    def headers(self, names: list[str], strict: bool = True) -> Iterator[tuple[str, dict[str, TensorInfo] | None]]:
        """(name, tensors) in order; strict: a bad header raises, else it gives None."""


class LocalShards:
    def __init__(self, root: Path):
        self.root = root

    def listing(self) -> set[str]:
        return weight_files(self.root)

    def other_indexes(self) -> list[str]:
        return self._names_where(_is_other_index)

    def fix_leftovers(self) -> list[str]:
        if held_here(self.root):
            return []  # this process's own fix at work: its files go when it ends
        return self._names_where(is_fix_leftover)

    def _names_where(self, wanted: Callable[[str], bool]) -> list[str]:
        """Top-level names `wanted` accepts, sorted; none where the directory cannot be listed."""
        try:
            with os.scandir(self.root) as it:
                return sorted(e.name for e in it if wanted(e.name))
        except OSError:
            return []

    def where(self, name: str) -> str:
        return str(self.root / name)

    def check_fetched(self, names: list[str]) -> None:
        raise_for_pointers(self.root, names)

    def headers(self, names: list[str], strict: bool = True) -> Iterator[tuple[str, dict[str, TensorInfo] | None]]:
        for name in names:
            try:
                yield name, read_header(self.root / name, name)
            except BadInput:
                if strict:
                    raise
                yield name, None


def weight_files(root: Path) -> set[str]:
    """The names vLLM's DefaultModelLoader finds with glob(join(root, "*.safetensors")): entries
    directly in `root`, hidden names excluded, links and directories not filtered out."""
    try:
        with os.scandir(root) as it:
            return {e.name for e in it if e.name.endswith(".safetensors") and not e.name.startswith(".")}
    except OSError as e:
        raise BadInput(f"cannot list the directory: {e.strerror or e}", path=str(root)) from e


def _is_other_index(name: str) -> bool:
    return name.endswith(".safetensors.index.json") and name != "model.safetensors.index.json"
