"""A validated inventory remembered by the stat of every file it came from.

A repeated lint of an unchanged checkpoint must not re-parse and re-validate ~70k header
entries. The memo is keyed by (path, name, size, mtime_ns) of config, index and shards;
any change to any of them misses. It stores plain columns (marshal), which load an order
of magnitude faster than pickled objects.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from pathlib import Path

from .model import Inventory, ModuleFormat, TensorInfo

FORMAT = 1


def signature(root: Path) -> str | None:
    h = hashlib.sha256(f"{FORMAT}\0{root}".encode())
    try:
        entries = [e for e in os.scandir(root) if e.name.endswith((".safetensors", ".json")) and e.is_file()]
    except OSError:
        return None
    for e in sorted(entries, key=lambda e: e.name):
        st = e.stat()
        h.update(f"{e.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _path(sig: str) -> Path:
    from ..probe.cache import cache_root

    return cache_root() / "inventory" / f"{sig}.marshal"


def store(sig: str, inv: Inventory) -> None:
    files = sorted({t.file for t in inv.tensors.values()})
    fidx = {f: i for i, f in enumerate(files)}
    ts = list(inv.tensors.values())
    mods = list(inv.modules.values())
    data = {
        "files": files,
        "shards": inv.shards,
        "digest": inv.digest,
        "index": str(inv.index_path) if inv.index_path else None,
        "t": (
            [t.name for t in ts],
            [t.dtype for t in ts],
            [t.shape for t in ts],
            [fidx[t.file] for t in ts],
            [t.begin for t in ts],
            [t.end for t in ts],
        ),
        "m": (
            [m.module for m in mods],
            [m.kind for m in mods],
            [m.weight_dtype for m in mods],
            [m.suffixes for m in mods],
        ),
    }
    path = _path(sig)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            marshal.dump(data, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # only costs time next run


def load(sig: str) -> dict | None:
    try:
        data = marshal.loads(_path(sig).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    new, set_ = object.__new__, object.__setattr__
    files = data["files"]
    tensors: dict[str, TensorInfo] = {}
    for name, dtype, shape, fi, begin, end in zip(*data["t"]):
        t = new(TensorInfo)
        set_(
            t, "__dict__", {"name": name, "dtype": dtype, "shape": shape, "file": files[fi], "begin": begin, "end": end}
        )
        tensors[name] = t
    modules = {m: ModuleFormat(m, k, w, s) for m, k, w, s in zip(*data["m"])}
    return {
        "tensors": tensors,
        "modules": modules,
        "shards": data["shards"],
        "digest": data["digest"],
        "index_path": Path(data["index"]) if data["index"] else None,
    }
