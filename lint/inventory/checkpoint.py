"""Build the Inventory of a local checkpoint directory from its JSON files and safetensors headers."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from operator import attrgetter
from pathlib import Path
from typing import Any

from mtplint.errors import BadInput
from mtplint.inventory import memo
from mtplint.inventory.declared import parse_declared
from mtplint.inventory.fingerprint import fingerprint_modules
from mtplint.inventory.model import Inventory, TensorInfo
from mtplint.inventory.safetensors_header import read_header

INDEX_NAME = "model.safetensors.index.json"
_FILE = attrgetter("file")
Progress = Callable[[int, int], None]


def load_inventory(path: str | os.PathLike, progress: Progress | None = None) -> Inventory:
    # Parsing 69k header entries allocates a few hundred thousand containers, none of them cyclic;
    # the cyclic GC would rescan the growing heap many times over for nothing.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _load(path, progress)
    finally:
        if paused:
            gc.enable()


def _load(path: str | os.PathLike, progress: Progress | None) -> Inventory:
    root = Path(path).expanduser().absolute()
    if not root.exists():
        raise BadInput("no such checkpoint directory", path=str(root))
    if not root.is_dir():
        raise BadInput("not a directory: pass the checkpoint directory", path=str(root))
    config_path = root / "config.json"
    if not config_path.is_file():
        raise BadInput("no config.json in the checkpoint directory", path=str(config_path))
    config = read_json_object(config_path)
    hq_path = root / "hf_quant_config.json"
    hf_quant = read_json_object(hq_path) if hq_path.is_file() else None
    declared = parse_declared(config, hf_quant, root)

    sig = memo.signature(root)
    hit = memo.load(sig) if sig else None
    if hit is not None:
        return Inventory(
            root=root, config=config, config_path=config_path, hf_quant_config=hf_quant, declared=declared, **hit
        )
    inventory = _read_layout(root, config, config_path, hf_quant, declared, progress)
    if sig:
        memo.store(sig, inventory)
    return inventory


def _read_layout(
    root: Path,
    config: dict[str, Any],
    config_path: Path,
    hf_quant: dict[str, Any] | None,
    declared: Any,
    progress: Progress | None,
) -> Inventory:
    index_path: Path | None = root / INDEX_NAME
    if index_path.is_file():
        tensors, shards = _load_indexed(root, index_path, progress)
    else:
        index_path = None
        # Without an index vLLM loads every *.safetensors in the directory, so do we.
        shards = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
        if not shards:
            raise BadInput(f"no *.safetensors files and no {INDEX_NAME}", path=str(root))
        tensors, _ = _read_shards(root, shards, progress)

    return Inventory(
        root=root,
        config=config,
        config_path=config_path,
        tensors=tensors,
        shards=shards,
        index_path=index_path,
        hf_quant_config=hf_quant,
        declared=declared,
        digest=layout_digest(tensors.values()),
        modules=fingerprint_modules(tensors.values(), hint=declared.method),
    )


def read_json_object(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=str(path)) from e
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text (bad byte at offset {e.start})", path=str(path)) from e
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", path=str(path)) from e
    if not isinstance(obj, dict):
        raise BadInput(f"expected a JSON object at the top level, got {type(obj).__name__}", path=str(path))
    return obj


def layout_digest(tensors: Iterable[TensorInfo]) -> str:
    """sha256 over the sorted (name, dtype, shape) triples: the same layout gives the same digest
    however it is sharded and whenever it was written."""
    rows = sorted(f"{t.name}\t{t.dtype}\t{t.shape}" for t in tensors)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _load_indexed(root: Path, index_path: Path, progress: Progress | None) -> tuple[dict[str, TensorInfo], list[str]]:
    where = str(index_path)
    index = read_json_object(index_path)
    wm = index.get("weight_map")
    if not isinstance(wm, dict):
        raise BadInput("weight_map is missing or not an object", path=where)
    if not wm:
        raise BadInput("weight_map is empty", path=where)
    if not all(type(s) is str for s in wm.values()):
        odd = next(n for n, s in wm.items() if type(s) is not str)
        raise BadInput(f"weight_map[{odd!r}] is not a file name: {wm[odd]!r}", path=where)
    shards = sorted(set(wm.values()))
    missing = [s for s in shards if not (root / s).is_file()]
    if missing:
        count = sum(1 for s in wm.values() if s == missing[0])
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise BadInput(f"weight_map names shard {missing[0]} ({count} tensors) which does not exist{more}", path=where)
    tensors, headers = _read_shards(root, shards, progress)
    # The common case in one C-level comparison; only a mismatch pays for the diagnosis below.
    if dict(zip(tensors, map(_FILE, tensors.values()))) == wm:
        return tensors, shards
    by_shard: defaultdict[str, set[str]] = defaultdict(set)
    for name, shard in wm.items():
        by_shard[shard].add(name)
    for shard in shards:
        have, want = headers[shard], by_shard[shard]
        lacking = want - have.keys()
        if lacking:
            raise BadInput(
                f"weight_map puts {_some(lacking)} in {shard}, whose header lacks "
                f"{'it' if len(lacking) == 1 else 'them'}",
                path=where,
            )
        extra = have.keys() - want
        if extra:
            raise BadInput(
                f"{_some(extra)} in this shard {'is' if len(extra) == 1 else 'are'} not in {INDEX_NAME}'s weight_map",
                path=str(root / shard),
            )
    return tensors, shards  # unreachable: unequal maps differ in some shard


def _read_shards(
    root: Path, shards: list[str], progress: Progress | None
) -> tuple[dict[str, TensorInfo], dict[str, dict[str, TensorInfo]]]:
    tensors: dict[str, TensorInfo] = {}
    headers: dict[str, dict[str, TensorInfo]] = {}
    for i, shard in enumerate(shards):
        header = read_header(root / shard, shard)
        before = len(tensors)
        tensors.update(header)
        if len(tensors) != before + len(header):
            # Some name was already present: find one, and the shard that had it first.
            name = min(n for n in header if any(n in h for h in headers.values()))
            first = next(s for s, h in headers.items() if name in h)
            raise BadInput(f"tensor {name!r} is in both {first} and {shard}", path=str(root / shard))
        headers[shard] = header
        if progress is not None:
            progress(i + 1, len(shards))
    return tensors, headers


def _some(names: Iterable[str], limit: int = 3) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    rest = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)} tensor{'s' if len(names) != 1 else ''} ({shown}{rest})"
