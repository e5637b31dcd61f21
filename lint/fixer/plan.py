"""What a fix plans: Changes to JSON files and new shards, rendered before anything is written.

A fix never writes: it returns Changes, so every fix can be shown as a diff (--dry-run),
combined with the others into one ordered write, and tested without touching files.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.regular_files import read_capped_text


@dataclass(frozen=True)
class PlanOptions:
    """What the user asked of every fix's plan (`mtplint fix --drop-dead`)."""

    drop_dead: bool = False  # also remove exclusion entries that match nothing


INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class NewTensor:
    """One tensor of a new shard, copied byte for byte from a tensor already on disk."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    source_file: str  # shard holding the bytes, relative to the checkpoint root
    source_begin: int  # absolute byte offsets in that shard
    source_end: int

    @property
    def nbytes(self) -> int:
        return self.source_end - self.source_begin


@dataclass
class Change:
    fix: str  # the fix id that planned it
    file: str  # relative to the checkpoint root
    summary: str  # one line for the plan listing
    # JSON files: mutate the parsed document in place. Edits of several fixes to the same
    # file are applied in plan order to one document.
    edit: Callable[[dict[str, Any]], None] | None = None
    create: bool = False  # the JSON file does not exist yet: edit starts from {}
    tensors: list[NewTensor] = field(default_factory=list)  # set: a new shard holding these
    notes: list[str] = field(default_factory=list)  # shown with the plan (e.g. what it disables)
    # Finding ids this change leaves in place on purpose (an original entry kept for other
    # runtimes): the re-lint still reports them, but they do not fail the fix.
    leaves: list[str] = field(default_factory=list)
    # Rule code -> why the re-lint is expected to report it once this change is made (it
    # still counts: the artifact is not servable with MTP, and the user should know why).
    expects: dict[str, str] = field(default_factory=dict)
    # Index changes: the bytes of each tensor the change may name in the weight_map, from which
    # render() settles metadata.total_size once, over the final map (see settle_total_size).
    tensor_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def is_shard(self) -> bool:
        return bool(self.tensors)


def _json_style(text: str) -> dict[str, Any]:
    """Re-dump a JSON file the way it was written, so a diff shows only the edit."""
    indent: int | str | None = None
    lines = text.splitlines()
    if len(lines) > 1:
        second = lines[1]
        indent = len(second) - len(second.lstrip(" ")) or None
        if indent is None and second.startswith("\t"):
            indent = "\t"
    return {
        "indent": indent,
        "ensure_ascii": text.isascii(),
        "separators": None if indent is not None else (", ", ": "),
        "trailing_newline": text.endswith("\n"),
    }


def dump_json(doc: dict[str, Any], like: str | None) -> str:
    style: dict[str, Any] = (
        _json_style(like)
        if like is not None
        else {"indent": 2, "ensure_ascii": False, "separators": None, "trailing_newline": True}
    )
    text = json.dumps(doc, indent=style["indent"], ensure_ascii=style["ensure_ascii"], separators=style["separators"])
    return text + ("\n" if style["trailing_newline"] else "")


@dataclass
class Rendered:
    """The result of a plan, file by file: JSON texts before/after and the new shards."""

    json: dict[str, tuple[str | None, str]]  # file -> (old text or None when created, new text)
    shards: dict[str, list[NewTensor]]

    def diff(self) -> str:
        out: list[str] = []
        for name, (old, new) in self.json.items():
            out.extend(
                difflib.unified_diff(
                    (old or "").splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=f"a/{name}" if old is not None else "/dev/null",
                    tofile=f"b/{name}",
                    n=2,
                )
            )
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
        return "".join(out)


MAX_JSON_BYTES = 256 << 20  # the inventory's own limit on the JSON files a fix rewrites


def render(root: Path, changes: list[Change]) -> Rendered:
    docs: dict[str, dict[str, Any]] = {}
    olds: dict[str, str | None] = {}
    shards: dict[str, list[NewTensor]] = {}
    sizes: dict[str, dict[str, int]] = {}
    for ch in changes:
        if ch.is_shard:
            shards.setdefault(ch.file, []).extend(ch.tensors)
            continue
        if ch.file not in docs:
            path = root / ch.file
            old = None if ch.create and not path.exists() else read_capped_text(path, MAX_JSON_BYTES)
            olds[ch.file] = old
            docs[ch.file] = json.loads(old) if old is not None else {}
        if ch.tensor_bytes:
            sizes.setdefault(ch.file, {}).update(ch.tensor_bytes)
        if ch.edit is not None:
            ch.edit(docs[ch.file])
    for name, known in sizes.items():
        old = olds[name]
        settle_total_size(json.loads(old) if old is not None else {}, docs[name], known)
    out = {}
    for name, doc in docs.items():
        new = dump_json(doc, olds[name])
        if new != olds[name]:
            out[name] = (olds[name], new)
    return Rendered(json=out, shards=shards)


def settle_total_size(before: dict[str, Any], after: dict[str, Any], nbytes: dict[str, int]) -> None:
    """metadata.total_size of an edited index, from its final weight_map: the total before, plus
    the bytes of each name the map gained, minus those of each it lost. Never a sum of what
    each fix added: two fixes naming one tensor (a killed fix's shard, then repaired by both
    the alias fix and the unindexed-shard fix) count it once. A new index sums its map. The
    total is left as it is when a name's size is unknown or the index never had one."""
    meta = after.get("metadata")
    old_map, new_map = before.get("weight_map"), after.get("weight_map")
    if not isinstance(meta, dict) or not isinstance(new_map, dict):
        return
    old_names = set(old_map) if isinstance(old_map, dict) else set()
    old_meta = before.get("metadata")
    total = old_meta.get("total_size") if isinstance(old_meta, dict) else (0 if not before else None)
    if not isinstance(total, int) or isinstance(total, bool) or "total_size" not in meta:
        return
    gained, lost = set(new_map) - old_names, old_names - set(new_map)
    if any(n not in nbytes for n in gained | lost):
        return
    meta["total_size"] = total + sum(nbytes[n] for n in gained) - sum(nbytes[n] for n in lost)


# --- dotted config keys ("quantization_config.ignore", "text_config.num_nextn_predict_layers")


def get_key(doc: dict[str, Any] | None, key: str, default: Any = None) -> Any:
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_key(doc: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
