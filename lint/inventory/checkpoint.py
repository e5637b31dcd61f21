"""Build the Inventory of a checkpoint from its JSON files and safetensors headers: a local
directory, or a hub repository (`hf://ORG/NAME[@REVISION]`, headers by range requests, remote.py)."""

from __future__ import annotations

import gc
import hashlib
import os
import stat
from collections import defaultdict
from collections.abc import Callable, Iterable
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from . import memo
from .declared import parse_declared
from .fingerprint import fingerprint_modules
from .model import Inventory, TensorInfo
from .shard_source import LocalShards, ShardSource, weight_files
from .strict_json import clip, read_json_object

__all__ = ["INDEX_NAME", "layout_digest", "load_inventory", "load_over", "read_json_object", "weight_files"]

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


def load_companion(path: str | os.PathLike, role: str, progress: Progress | None = None) -> Inventory:
    """load_inventory for a checkpoint given beside the one linted (role: "the --draft
    checkpoint"): its bad input says which of them it is about."""
    try:
        return load_inventory(path, progress)
    except BadInput as e:
        raise BadInput(f"{e} ({role})", path=e.path, detail=e.detail) from None


def _load(path: str | os.PathLike, progress: Progress | None) -> Inventory:
    from .remote import hub_spec

    spec = hub_spec(path)
    if spec is not None:
        return _load_remote(spec, progress)
    try:
        root = Path(path).expanduser().absolute()
    except RuntimeError as e:  # "~nosuchuser/..."
        raise BadInput(f"cannot expand the path: {e}", path=str(path)) from e
    st = _stat(root)
    if st is None:
        raise BadInput("no such checkpoint directory", path=str(root))
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput("not a directory: pass the checkpoint directory", path=str(root))
    config_path = root / "config.json"
    if _stat(config_path) is None:
        raise BadInput("no config.json in the checkpoint directory", path=str(config_path))
    config = read_json_object(config_path)
    hq_path = root / "hf_quant_config.json"
    hq_st = _stat(hq_path)
    hf_quant = read_json_object(hq_path) if hq_st is not None and stat.S_ISREG(hq_st.st_mode) else None
    declared = parse_declared(config, hf_quant, root)
    return _from_memo_or_read(memo.signature(root), root, LocalShards(root), config, hf_quant, declared, progress)


def _from_memo_or_read(
    sig: str | None,
    root: Path,
    source: ShardSource,
    config: dict[str, Any],
    hf_quant: dict[str, Any] | None,
    declared: Any,
    progress: Progress | None,
    origin: str | None = None,
) -> Inventory:
    config_path = root / "config.json"
    hit = memo.load(sig) if sig else None
    if hit is not None:
        heads = hit.pop("name_heads")
        inventory = Inventory(
            root=root,
            config=config,
            config_path=config_path,
            hf_quant_config=hf_quant,
            declared=declared,
            origin=origin,
            fix_leftovers=source.fix_leftovers(),
            **hit,
        )
        inventory.__dict__["name_heads"] = heads  # the cached property, as the memo kept it
        return inventory
    inventory = _read_layout(root, config, config_path, hf_quant, declared, progress, source)
    inventory.origin = origin
    if sig:
        memo.store(sig, inventory)
    inventory.fix_leftovers = source.fix_leftovers()
    return inventory


def _load_remote(spec: Any, progress: Progress | None) -> Inventory:
    """A hub revision: its small files from huggingface_hub's cache (one request resolves the
    revision), its headers by range requests unless the memo, keyed by the commit, has them.
    Errors name hf://ORG/NAME@COMMIT/FILE, never the cache's local path."""
    from . import remote

    repo = remote.resolve(spec)
    try:
        root = remote.fetch_small_files(repo)
        config = read_json_object(root / "config.json")
        if remote.auto_map_code(config):
            remote.fetch_small_files(repo, config)  # configuration code, for --trust-remote-code
        hq_path = root / "hf_quant_config.json"
        hf_quant = read_json_object(hq_path) if "hf_quant_config.json" in repo.files else None
        declared = parse_declared(config, hf_quant, root)
        sig = memo.remote_signature(repo.endpoint, repo.spec.repo_id, repo.commit)
        return _from_memo_or_read(sig, root, remote.HubShards(repo), config, hf_quant, declared, progress, repo.label)
    except BadInput as e:
        if e.path and repo.snapshot is not None and e.path.startswith(str(repo.snapshot)):
            e.path = repo.label + e.path[len(str(repo.snapshot)) :]
        raise


def load_over(root: Path, source: ShardSource, origin: str | None = None) -> Inventory:
    """The inventory of the small files in `root` over the shard headers `source` serves, never
    memoized (mtplint fix: a hub fix's changed files over the headers its lint already read)."""
    config = read_json_object(root / "config.json")
    hq_path = root / "hf_quant_config.json"
    hf_quant = read_json_object(hq_path) if hq_path.is_file() else None
    declared = parse_declared(config, hf_quant, root)
    return _from_memo_or_read(None, root, source, config, hf_quant, declared, None, origin)


def _stat(path: Path) -> os.stat_result | None:
    """stat() following links; None when nothing is there. Other failures (a name too long, a loop,
    no permission) are bad input, not a crash."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot stat: {getattr(e, 'strerror', None) or e}", path=str(path)) from e


def _read_layout(
    root: Path,
    config: dict[str, Any],
    config_path: Path,
    hf_quant: dict[str, Any] | None,
    declared: Any,
    progress: Progress | None,
    source: ShardSource,
) -> Inventory:
    index_file = root / INDEX_NAME
    index_st = _stat(index_file)
    index_path: Path | None = None
    unindexed: dict[str, list[TensorInfo] | None] = {}
    if index_st is not None and stat.S_ISREG(index_st.st_mode):
        index_path = index_file
        tensors, shards, unindexed = _load_indexed(source, index_file, progress)
    else:
        # Without an index vLLM loads every *.safetensors in the directory (a directory or a
        # dangling link so named included: it fails on those, so do we).
        shards = sorted(source.listing())
        if not shards:
            raise BadInput(f"no *.safetensors files and no {INDEX_NAME}", path=source.where(""))
        tensors, _ = _read_shards(source, shards, progress)

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
        unindexed=unindexed,
        other_indexes=source.other_indexes(),
    )


def layout_digest(tensors: Iterable[TensorInfo]) -> str:
    """sha256 over the sorted (name, dtype, shape) triples: the same layout gives the same digest
    however it is sharded and whenever it was written."""
    rows = sorted(f"{t.name}\t{t.dtype}\t{t.shape}" for t in tensors)
    # surrogatepass: the same bytes as utf-8 for every valid name, and no crash on a lone surrogate.
    return hashlib.sha256("\n".join(rows).encode("utf-8", "surrogatepass")).hexdigest()


def _load_indexed(
    source: ShardSource, index_path: Path, progress: Progress | None
) -> tuple[dict[str, TensorInfo], list[str], dict[str, list[TensorInfo] | None]]:
    where = str(index_path)
    index = read_json_object(index_path)
    wm = index.get("weight_map")
    if not isinstance(wm, dict):
        raise BadInput("weight_map is missing or not an object", path=where)
    if not wm:
        raise BadInput("weight_map is empty", path=where)
    if not all(type(s) is str for s in wm.values()):
        odd = next(n for n, s in wm.items() if type(s) is not str)
        raise BadInput(f"weight_map[{clip(odd)}] is not a file name: {clip(wm[odd])}", path=where)
    shards = sorted(set(wm.values()))
    # vLLM (filter_duplicate_safetensors_files) keeps join(root, name) only when its glob of
    # root/*.safetensors found exactly that path, else FileNotFoundError: a name with a slash, an
    # absolute path, a hidden or non-.safetensors name never loads. Names are only compared with
    # the listing, never opened as given: nothing outside the directory is touched.
    present = source.listing()
    missing = [s for s in shards if s not in present]
    if missing:
        raise BadInput(_unloadable(missing, wm), path=where)
    tensors, headers = _read_shards(source, shards, progress)
    # Shards the index never names load nowhere; their headers are read (leniently: vLLM never
    # opens them) so that MTP015 can name the tensors they hold.
    outside = sorted(present.difference(shards))
    unindexed = dict(source.headers(outside, strict=False)) if outside else {}
    unindexed_lists = {s: (list(h.values()) if h is not None else None) for s, h in unindexed.items()}
    # The common case in one C-level comparison; only a mismatch pays for the diagnosis below.
    if dict(zip(tensors, map(_FILE, tensors.values()), strict=True)) == wm:
        return tensors, shards, unindexed_lists
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
                path=source.where(shard),
            )
    return tensors, shards, unindexed_lists  # unreachable: unequal maps differ in some shard


def _unloadable(missing: list[str], wm: dict[str, str]) -> str:
    shard = missing[0]
    tensor = next(n for n, s in wm.items() if s == shard)
    count = sum(1 for s in wm.values() if s == shard)
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    where = f"weight_map[{clip(tensor)}] names shard {clip(shard)} ({count} tensor{'s' if count != 1 else ''})"
    why = _why_unloadable(shard)
    if why is None:
        return f"{where} which does not exist{more}"
    return (
        f"{where}, {why}: vLLM loads only *.safetensors files directly in the checkpoint directory "
        f"and fails on this index with FileNotFoundError{more}"
    )


def _why_unloadable(name: str) -> str | None:
    if name.startswith("/"):
        return "an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "a path out of the checkpoint directory"
    if len(parts) > 1:
        return "a path into a subdirectory"
    if not name.endswith(".safetensors"):
        return "not a *.safetensors name"
    if name.startswith("."):
        return "a hidden file name"
    return None


def _read_shards(
    source: ShardSource, shards: list[str], progress: Progress | None
) -> tuple[dict[str, TensorInfo], dict[str, dict[str, TensorInfo]]]:
    tensors: dict[str, TensorInfo] = {}
    headers: dict[str, dict[str, TensorInfo]] = {}
    source.check_fetched(shards)
    for i, (shard, header) in enumerate(source.headers(shards)):
        assert header is not None  # strict: a bad header raised
        before = len(tensors)
        tensors.update(header)
        if len(tensors) != before + len(header):
            # Some name was already present: find one, and the shard that had it first.
            name = min(n for n in header if any(n in h for h in headers.values()))
            first = next(s for s, h in headers.items() if name in h)
            raise BadInput(f"tensor {clip(name)} is in both {first} and {shard}", path=source.where(shard))
        headers[shard] = header
        if progress is not None:
            progress(i + 1, len(shards))
    return tensors, headers


def _some(names: Iterable[str], limit: int = 3) -> str:
    names = sorted(names)
    shown = ", ".join(clip(n) for n in names[:limit])
    rest = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)} tensor{'s' if len(names) != 1 else ''} ({shown}{rest})"
