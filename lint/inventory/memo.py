"""A validated inventory remembered by what it was read from.

A repeated lint of an unchanged checkpoint must not re-parse and re-validate ~70k header
entries. The key covers config.json, hf_quant_config.json and the index (stat and a hash of
their bytes) and every *.safetensors file vLLM could load from the directory, which includes
every shard the index may name (size, mtime_ns, inode, device, and a hash of its header):
a same-size rewrite with its mtime restored still misses. Hashing the ~46 headers of a large
checkpoint costs a few milliseconds, a fraction of the memo load itself.

Entries are plain columns (marshal), which load an order of magnitude faster than pickled
objects; they carry their key and format. An entry that does not check out (unreadable,
truncated, another key or format, ragged columns) is a miss and is removed.

A hub repository's key is its endpoint, name and resolved commit: a commit's files never change.
Entries are sealed (cache_dirs.write_entry: an HMAC with this user's secret over the name and
bytes): a cache directory others can write (shared, restored by CI) must not hand marshal
foreign bytes or a forged inventory. The seal costs ~10 ms on a 6 MB entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from pathlib import Path

from ..core.cache_dirs import cache_root, read_entry, write_entry
from ..core.errors import BadInput
from .model import Inventory, ModuleFormat, TensorInfo
from .safetensors_header import MAX_HEADER_BYTES
from .strict_json import MAX_JSON_BYTES, open_regular

# Bump whenever what a successful load accepts changes, so entries stored under older rules are not served.
FORMAT = 4
JSON_FILES = ("config.json", "hf_quant_config.json", "model.safetensors.index.json")


def remote_signature(endpoint: str, repo_id: str, commit: str) -> str:
    """The memo key of a hub revision: what the commit holds cannot change."""
    return hashlib.sha256(f"{FORMAT}\0hub\0{endpoint}\0{repo_id}\0{commit}".encode()).hexdigest()


def signature(root: Path) -> str | None:
    """The memo key of the checkpoint at `root`, or None when some file cannot be keyed (then no memo)."""
    h = hashlib.sha256(f"{FORMAT}\0".encode() + os.fsencode(root) + b"\0")
    try:
        with os.scandir(root) as it:
            names = sorted(e.name for e in it if _json_file(e.name) or _loadable_shard_name(e.name))
    except OSError:
        return None
    for name in names:
        record = _record(root / name, whole=_json_file(name))
        if record is None:
            return None
        h.update(record)
    return h.hexdigest()


def _json_file(name: str) -> bool:
    # Other *.safetensors.index.json files (a sidecar MTP index) are part of what MTP015 reports.
    return name in JSON_FILES or name.endswith(".safetensors.index.json")


def _loadable_shard_name(name: str) -> bool:
    # vLLM's glob("*.safetensors"): hidden names do not match.
    return name.endswith(".safetensors") and not name.startswith(".")


def _record(path: Path, whole: bool) -> bytes | None:
    try:
        f, st = open_regular(path, "")
    except BadInput:
        return None  # the full read names the problem
    with f:
        try:
            if whole:
                if st.st_size > MAX_JSON_BYTES:
                    return None
                body = f.read()
            else:
                n = int.from_bytes(f.read(8), "little")
                if st.st_size < 8 or n > MAX_HEADER_BYTES or 8 + n > st.st_size:
                    return None
                body = f.read(n)
        except OSError:
            return None
    stats = f"\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_dev}\0".encode()
    return os.fsencode(path.name) + stats + hashlib.sha256(body).digest()


def _path(sig: str) -> Path:
    return cache_root() / "inventory" / f"{sig}.marshal"


def store(sig: str, inv: Inventory) -> None:
    outside = [t for ts_ in inv.unindexed.values() for t in ts_ or ()]
    files = sorted({t.file for t in inv.tensors.values()} | {t.file for t in outside})
    fidx = {f: i for i, f in enumerate(files)}
    ts = list(inv.tensors.values())
    mods = list(inv.modules.values())
    data = {
        "format": FORMAT,
        "key": sig,
        "files": files,
        "shards": inv.shards,
        "digest": inv.digest,
        "index": str(inv.index_path) if inv.index_path else None,
        "t": _columns(ts, fidx),
        "m": (
            [m.module for m in mods],
            [m.kind for m in mods],
            [m.weight_dtype for m in mods],
            [m.suffixes for m in mods],
        ),
        "unindexed": [[s, ts_ is not None] for s, ts_ in inv.unindexed.items()],
        "u": _columns(outside, fidx),
        "other_indexes": list(inv.other_indexes),
        "heads": sorted(inv.name_heads),
    }
    try:
        body = marshal.dumps(data)
    except ValueError:
        return
    write_entry(_path(sig), body)


def _columns(ts: list[TensorInfo], fidx: dict[str, int]) -> tuple[list, ...]:
    return (
        [t.name for t in ts],
        [t.dtype for t in ts],
        [t.shape for t in ts],
        [fidx[t.file] for t in ts],
        [t.begin for t in ts],
        [t.end for t in ts],
    )


def load(sig: str) -> dict | None:
    path = _path(sig)
    blob = read_entry(path)  # sealed by this user's mtplint, or a miss: marshal reads nothing else
    if blob is None:
        return None
    try:
        return _decode(blob, sig)
    except Exception:
        # Corrupt, truncated, foreign or from another format: a miss, and gone so it costs nothing again.
        with contextlib.suppress(OSError):
            path.unlink()
        return None


def _decode(blob: bytes, sig: str) -> dict:
    data = marshal.loads(blob)
    if data["format"] != FORMAT or data["key"] != sig:
        raise ValueError("not this entry")
    files = data["files"]
    tensors = _rows(data["t"], files)
    modules = {m: ModuleFormat(m, k, w, s) for m, k, w, s in zip(*data["m"], strict=True)}
    unindexed: dict[str, list[TensorInfo] | None] = {s: ([] if readable else None) for s, readable in data["unindexed"]}
    for t in _rows(data["u"], files).values():
        rows = unindexed[t.file]  # a KeyError here: a corrupt entry, a miss
        if rows is None:
            raise ValueError("tensors listed for an unreadable shard")
        rows.append(t)
    return {
        "unindexed": unindexed,
        "other_indexes": [str(n) for n in data["other_indexes"]],
        "name_heads": frozenset(str(h) for h in data["heads"]),
        "tensors": tensors,
        "modules": modules,
        "shards": list(data["shards"]),
        "digest": str(data["digest"]),
        "index_path": Path(data["index"]) if data["index"] else None,
    }


def _rows(columns: tuple[list, ...], files: list[str]) -> dict[str, TensorInfo]:
    if len(columns) != 6 or len({len(c) for c in columns}) != 1:
        raise ValueError("ragged columns")
    new, set_ = object.__new__, object.__setattr__
    tensors: dict[str, TensorInfo] = {}
    # Not zip(strict=True), checked above instead: strict zip builds a new tuple per row (+50%).
    for name, dtype, shape, fi, begin, end in zip(*columns):  # noqa: B905
        t = new(TensorInfo)
        set_(
            t, "__dict__", {"name": name, "dtype": dtype, "shape": shape, "file": files[fi], "begin": begin, "end": end}
        )
        tensors[name] = t
    return tensors
