"""Shared by the two exclusion fixes: which runtime prefixes to exclude, how each format
spells an entry, and where the entries live.

Entries are written in the runtime namespace (the `prefix=` vLLM passes to
get_quant_method), because that is the only namespace vLLM's matchers compare with.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from ..inventory.model import Inventory
from ..probe.report import Model, ProbeReport
from .plan import Change, get_key, set_key

CONFIG = "config.json"
HF_QUANT = "hf_quant_config.json"
_LAYER_ROOT = re.compile(r"^(.*?\.\d+\.)")


@dataclass
class ExclusionList:
    """Where a checkpoint's exclusion entries live and how its format spells them."""

    style: str  # "ct" | "modelopt" | "fp8" | "gptq" | "awq" | "quark" | "inc" | "exact"
    places: list[tuple[str, str]]  # (file, dotted key); the first is the one vLLM reads
    exact_of: dict[str, str] = field(default_factory=dict)  # exact-name entry -> its prefix

    @property
    def is_dict(self) -> bool:
        # GPTQ `dynamic`: {"-:regex": {}} skips a module; AutoRound/INC `extra_config`:
        # {name or regex: {"bits": 16, ...}} keeps it unquantized.
        return self.style in ("gptq", "inc")

    def dict_value(self) -> dict[str, Any]:
        return {"bits": 16, "data_type": "float"} if self.style == "inc" else {}

    def exact(self, prefix: str) -> str:
        entry = f"-:^{re.escape(prefix)}$" if self.style == "gptq" else prefix
        self.exact_of[entry] = prefix
        return entry

    def layer(self, root: str) -> str | None:
        """An entry matching every prefix under `root` ("model.layers.43."), or None when
        the format's matcher has no such form (fp8 matches exact names only)."""
        if self.style in ("ct", "quark"):  # Quark's matcher takes compressed-tensors' `re:`
            return "re:^" + re.escape(root)
        if self.style == "inc":  # INC searches a key with regex characters as a regex
            return "^" + re.escape(root)
        if self.style == "gptq":
            return "-:^" + re.escape(root)
        if self.style == "modelopt":
            return root + "*"
        if self.style == "awq":
            return root  # AWQ skips a module when an entry is a substring of its prefix
        return None

    def covers(self, entry: str, prefix: str) -> bool:
        """Does `entry` surely match `prefix`? Only used to skip redundant additions; a
        False here never hides a problem (the re-lint asks vLLM)."""
        if entry == prefix:
            return True
        if self.style in ("ct", "quark") and entry.startswith("re:"):
            return _rx_match(entry[3:], prefix)
        if self.style == "inc" and entry.startswith("^"):
            return _rx_match(entry, prefix)
        if self.style == "gptq" and entry.startswith("-:"):
            return _rx_match(entry[2:], prefix)
        if self.style == "modelopt":
            return fnmatch.fnmatch(prefix, entry)
        if self.style == "awq":
            return entry in prefix
        return False

    def _covered(self, entry: str, have: list[str]) -> bool:
        # Only an exact name can be judged covered by another entry; a pattern never is.
        prefix = self.exact_of.get(entry)
        return prefix is not None and any(h != entry and self.covers(h, prefix) for h in have)

    def current(self, doc: dict[str, Any], key: str) -> list[str]:
        value = get_key(doc, key)
        if isinstance(value, dict):
            return list(value)
        return list(value) if isinstance(value, list) else []

    def add_change(self, fix: str, entries: list[str], summary: str) -> list[Change]:
        """One Change per place; each skips entries an entry already there covers."""
        changes = []
        for file, key in self.places:

            def edit(doc: dict[str, Any], key: str = key) -> None:
                have = self.current(doc, key)
                todo: list[str] = []
                for e in entries:
                    if e not in have and e not in todo and not self._covered(e, have + todo):
                        todo.append(e)
                if not todo:
                    return
                if self.is_dict:
                    value = get_key(doc, key)
                    value = dict(value) if isinstance(value, dict) else {}
                    value.update({e: self.dict_value() for e in todo})
                else:
                    value = have + todo
                set_key(doc, key, value)

            changes.append(Change(fix=fix, file=file, summary=f"{file}:{key}: {summary}", edit=edit))
        return changes

    def remove_change(self, fix: str, entries: list[str], summary: str) -> list[Change]:
        changes = []
        for file, key in self.places:

            def edit(doc: dict[str, Any], key: str = key) -> None:
                value = get_key(doc, key)
                if isinstance(value, dict):
                    set_key(doc, key, {k: v for k, v in value.items() if k not in entries})
                elif isinstance(value, list):
                    set_key(doc, key, [e for e in value if e not in entries])

            changes.append(Change(fix=fix, file=file, summary=f"{file}:{key}: {summary}", edit=edit))
        return changes


def _rx_match(pattern: str, s: str) -> bool:
    try:
        return re.match(pattern, s) is not None
    except re.error:
        return False


def exclusion_list(inventory: Inventory) -> ExclusionList | None:
    """Where this checkpoint's exclusion entries are read from, or None when it declares
    no quantization (nothing is built quantized, so nothing needs excluding)."""
    from ..inventory.declared import find_quant_config

    d = inventory.declared
    method = d.method or ""
    if not method:
        return None
    style = (
        "ct"
        if method == "compressed-tensors"
        else "modelopt"
        if method.startswith("modelopt")
        else method
        if method in ("fp8", "gptq", "awq", "quark")
        else "inc"
        if method in ("inc", "auto-round")
        else "exact"
    )
    source = d.source or CONFIG
    key = d.exclusion_key
    if key is None:
        _qc, qc_key = find_quant_config(inventory.config)
        body = qc_key
        if style == "modelopt":
            if source == HF_QUANT:
                body = "quantization"
            elif isinstance(get_key(inventory.config, f"{qc_key}.quantization"), dict):
                body = f"{qc_key}.quantization"
        leaf = {
            "ct": "ignore",
            "modelopt": "exclude_modules",
            "fp8": "ignored_layers",
            "gptq": "dynamic",
            "awq": "modules_to_not_convert",
            "quark": "exclude",
            "inc": "extra_config",
        }.get(style)
        if leaf is None or not body:
            return None
        key = f"{body}.{leaf}"
    places = [(source, key)]
    # ModelOpt tools other than vLLM (TensorRT-LLM, older loaders) read hf_quant_config.json;
    # keep its list in step when config.json is the one vLLM reads.
    hq = inventory.hf_quant_config
    if style == "modelopt" and source == CONFIG and isinstance(hq, dict) and isinstance(hq.get("quantization"), dict):
        places.append((HF_QUANT, "quantization.exclude_modules"))
    return ExclusionList(style=style, places=places)


# --- runtime prefixes, from the probe report ------------------------------------------


def feeders(ctx: Any) -> dict[tuple[Model, str], set[str]]:
    """(model, construction prefix) -> the on-disk modules whose tensors were loaded (or
    failed to load) into it."""
    out: dict[tuple[Model, str], set[str]] = {}
    for ondisk, model, prefix in ctx.ondisk_to_runtime:
        out.setdefault((model, prefix), set()).add(ondisk)
    return out


def covered_now(report: ProbeReport) -> set[tuple[Model, str]]:
    """(model, prefix) pairs some live entry of the usual exclusion list already excludes."""
    usual = report.usual_exclusions
    return {(h.model, h.prefix) for hits in (usual.entries if usual else {}).values() for h in hits}


def unquantized_on_disk(inventory: Inventory, modules: set[str]) -> bool:
    fmts = [inventory.modules.get(m) for m in modules]
    return all(f is not None and not f.quantized for f in fmts)


def runtime_entries(
    ctx: Any,
    lst: ExclusionList,
    wanted: list[tuple[Model, str]],
    feed: dict[tuple[Model, str], set[str]],
    collapse: bool,
) -> tuple[list[str], list[str]]:
    """Entries excluding `wanted` (model, prefix) pairs: one anchored layer entry where a
    whole layer is meant and excluding all of it changes nothing else, exact names
    otherwise. Returns (entries, notes)."""
    keep: list[tuple[Model, str]] = []
    quantized: list[tuple[Model, str]] = []
    for mp in wanted:
        src = feed.get(mp, set())
        # Excluding a module whose tensors are quantized on disk would build it unquantized
        # for quantized tensors (MTP003): the disk wins over the entry's intent.
        (quantized if src and not unquantized_on_disk(ctx.inventory, src) else keep).append(mp)
    notes = (
        [
            f"{len(quantized)} module(s) left quantized because their tensors are quantized on disk "
            f"(e.g. {quantized[0][1]})"
        ]
        if quantized
        else []
    )
    covered = covered_now(ctx.report)
    todo = [mp for mp in keep if mp not in covered]  # a live entry already excludes the rest
    entries: list[str] = []
    done: set[tuple[Model, str]] = set()
    if collapse:
        for root in sorted({m.group(1) for _, p in todo if (m := _LAYER_ROOT.match(p))}):
            entry = lst.layer(root)
            if entry is None or not _whole_layer(ctx, root, set(keep), feed):
                continue
            entries.append(entry)
            done |= {mp for mp in todo if mp[1].startswith(root)}
    from ..view.exclusions import compared_names

    for mp in todo:
        if mp in done:
            continue
        # The names vLLM's matcher compares for this layer, not its prefix: a
        # compressed-tensors FusedMoE is decided by `{prefix}.0.{gate,up,down}_proj`.
        for name in compared_names(ctx, [mp]):
            e = lst.exact(name)
            if e not in entries:
                entries.append(e)
    return entries, notes


def _whole_layer(ctx: Any, root: str, keep: set[tuple[Model, str]], feed: dict[tuple[Model, str], set[str]]) -> bool:
    """True when excluding everything under `root` excludes what is wanted and, beyond it,
    only modules that are unfed or already built unquantized from unquantized tensors."""
    from ..view.report_view import is_quantized_method

    wanted_here = [mp for mp in keep if mp[1].startswith(root)]
    if len(wanted_here) < 2:
        return False  # one module: its exact name says the same thing, more plainly
    for d in ctx.report.decisions:
        mp = (d.model, d.prefix)
        if not d.prefix.startswith(root) or mp in keep:
            continue
        src = feed.get(mp)
        if src and (is_quantized_method(d.method) or not unquantized_on_disk(ctx.inventory, src)):
            return False
    return True
