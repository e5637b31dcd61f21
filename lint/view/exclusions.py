"""How an exclusion list's entries relate to what vLLM builds: the on-disk modules an entry names, the
construction prefixes those were loaded into, the names vLLM compares entries with, and the dead entries
of a list grouped by the block vLLM asked it about. MTP001's check and the exclusion fixes share them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..probe.report import ExclusionSection, Layer, Model
from .report_view import ReportView

Member = tuple[str, list[str], list[tuple[Model, str]], bool]  # entry, on-disk modules meant, prefixes, mtp intent
Asked = tuple[tuple[Model, str], ...]


class ModuleNames:
    """A checkpoint's on-disk module names, with an index by dotted suffix: exact and suffix
    entries are one lookup each (a 1,333-entry per-Linear list over 35k modules was 47
    million endswith calls). One index per suffix length an entry has, built when first
    asked: a list's entries come in one or two lengths."""

    def __init__(self, names: Iterable[str]):
        self.names = sorted(names)
        self._by_suffix: dict[int, dict[str, list[str]]] = {}

    def ending_with(self, entry: str) -> list[str]:
        """The names equal to `entry` or ending with `.entry`, in name order."""
        k = entry.count(".") + 1
        index = self._by_suffix.get(k)
        if index is None:
            index = self._by_suffix[k] = {}
            for name in self.names:
                parts = name.rsplit(".", k)
                if len(parts) == k:
                    index.setdefault(name, []).append(name)
                elif len(parts) > k:
                    index.setdefault(name[len(parts[0]) + 1 :], []).append(name)
        return list(index.get(entry, ()))


def ondisk_modules_meant(entry: str, modules: ModuleNames) -> list[str]:
    """On-disk modules the entry would match if it were written in the on-disk namespace.

    A hand-written reading of the entry (re.match for `re:`, fnmatch-ish `*`, exact or
    suffix otherwise), used only to *suggest* what the author meant; whether the entry
    matches at runtime is vLLM's answer, from the probe.
    """
    if entry.startswith("-:"):
        entry = "re:" + entry[2:]
    if entry.startswith("re:"):
        try:
            rx = re.compile(entry[3:])
        except re.error:
            return []
        return [m for m in modules.names if rx.match(m)]
    if "*" in entry or "?" in entry:
        import fnmatch

        return [m for m in modules.names if fnmatch.fnmatch(m, entry)]
    return modules.ending_with(entry)


def _runtime_prefix_index(ctx: ReportView) -> dict[str, dict[tuple[Model, str], None]]:
    """On-disk module -> construction prefixes its tensors were (or failed to be) loaded into."""
    index = ctx.memo("ondisk_to_runtime_index")
    if not index:
        for ondisk, model, prefix in ctx.ondisk_to_runtime:
            index.setdefault(ondisk, {})[(model, prefix)] = None
    return index


def _prefixes_of_paths_named(ctx: ReportView, entry: str) -> list[tuple[Model, str]]:
    """Construction prefixes of the modules whose path (not prefix) the entry names. A module
    nothing on disk feeds (the MTP head GLM-5 does not ship) gives the entry no on-disk name to
    go by; its path, `model.layers.78.shared_head.head`, is what an author writes, while vLLM
    compares `model.layers.78.head`."""
    memo = ctx.memo("paths_to_prefixes")
    if not memo:
        by_path: dict[str, dict[tuple[Model, str], None]] = {}
        for d in ctx.report.decisions:
            if d.module and d.module != d.prefix:
                by_path.setdefault(d.module, {})[(d.model, d.prefix)] = None
        memo["names"], memo["by_path"] = ModuleNames(by_path), by_path
    names, by_path = memo["names"], memo["by_path"]
    out: dict[tuple[Model, str], None] = {}
    for path in ondisk_modules_meant(entry, names):
        out.update(by_path[path])
    return list(out)


def runtime_prefixes_meant(ctx: ReportView, entry: str, meant: list[str]) -> list[tuple[Model, str]]:
    """The construction prefixes a dead entry most likely meant: those its on-disk modules
    (`meant`) were loaded into, else those of the runtime module paths it names."""
    return runtime_prefixes_for(ctx, meant) or _prefixes_of_paths_named(ctx, entry)


def runtime_prefixes_for(ctx: ReportView, ondisk: list[str]) -> list[tuple[Model, str]]:
    index = _runtime_prefix_index(ctx)
    out: dict[tuple[Model, str], None] = {}
    for module in ondisk:
        out.update(index.get(module, {}))
    return list(out)


def compared_names(ctx: ReportView, prefixes: Iterable[tuple[Model, str]]) -> list[str]:
    """The names vLLM's matcher compares an entry with to decide these layers (a
    compressed-tensors FusedMoE: `{prefix}.0.{gate,up,down}_proj`), the prefix itself
    where the probe recorded none."""
    by_layer = {(d.model, d.prefix): d.compared for d in ctx.report.decisions if d.compared}
    out: dict[str, None] = {}
    for mp in prefixes:
        out.update(dict.fromkeys(by_layer.get(mp) or [mp[1]]))
    return list(out)


def _section_key(ctx: ReportView, first: ExclusionSection, section: ExclusionSection) -> str:
    """The config key a section's entries were read from."""
    declared = ctx.inventory.declared.exclusion_key
    if section.config_key:
        # A list the probed config reads besides its usual one (DeepseekV4FP8Config's
        # `ignore` next to Fp8Config's `ignored_layers`): same body, its own leaf.
        body = declared.rsplit(".", 1)[0] if declared and "." in declared else "quantization_config"
        return f"{body}.{section.config_key}"
    return declared or f"quantization_config.{first.attr}"


def sections(ctx: ReportView) -> list[tuple[str, ExclusionSection]]:
    """(config key, section) for every exclusion list the probe evaluated, but a list vLLM
    filled from the checkpoint itself (the config declared none): nobody wrote its entries."""
    usual = ctx.report.usual_exclusions
    if usual is None:
        return []
    return [(_section_key(ctx, usual, s), s) for s in ctx.exclusion_sections() if not s.filled_by]


def dead_entries(
    ctx: ReportView, ex: ExclusionSection, ondisk_modules: ModuleNames, markers: list[str]
) -> tuple[list[Member], dict[Asked, list[Member]]]:
    """A section's dead entries: (judged one by one, grouped by the block vLLM asked about).

    The groups exist where the config reads the list only for some layers, through a method
    of its own (`consulted`); entries naming modules vLLM never asks that list about are
    inert and in neither.
    """
    entries = ex.entries
    # {layer vLLM asked the list about: the name it compared the entries with}.
    consulted = ex.consulted
    written = ex.as_written
    single: list[Member] = []
    aimed: dict[Asked, list[Member]] = {}
    excluded = {h for hits in entries.values() for h in hits}
    for entry, matched in entries.items():
        if not matched and _other_half_matches(entry, entries):
            continue
        if matched or ex.undecided.get(entry):
            # Matched, or naming a Linear vLLM builds without asking the config (`eh_proj`
            # as nn.Linear): the entry declares it unquantized and keeps it so once vLLM
            # routes it through the config (MTP016 reports the undeclared ones).
            continue
        meant = ondisk_modules_meant(written.get(entry, entry), ondisk_modules)
        prefixes = runtime_prefixes_meant(ctx, written.get(entry, entry), meant)
        if prefixes and all(mp in excluded for mp in prefixes):
            # Per-Linear entries vLLM does not compare (compressed-tensors decides a FusedMoE
            # from expert 0 only) inside blocks the list already excludes: they describe
            # the artifact truthfully and change nothing.
            continue
        mtp_intent = any(m in entry.lower() for m in markers) or any(
            m.startswith("mtp.") or ".mtp." in m for m in meant
        )
        if consulted is not None and meant:
            asked = _asked_about(consulted, meant, prefixes)
            if not asked:
                # The modules it names exist, but vLLM never asks this list about them (it
                # builds them the same way whatever the list says): inert, not dead.
                continue
            # Entries that miss the same module vLLM asked about are one finding (a
            # per-Linear list holds hundreds of them for one expert block).
            aimed.setdefault(asked, []).append((entry, meant, prefixes, mtp_intent))
            continue
        single.append((entry, meant, prefixes, mtp_intent))
    return single, aimed


def _other_half_matches(entry: str, entries: dict[str, list[Layer]]) -> bool:
    """vLLM's ModelOpt config splits an entry `X*` into `X` and `X.*` before matching
    (ModelOptQuantConfigBase.apply_vllm_mapper, vllm #28072): the entry as written is alive
    when either half matches (`*lilicorr*` -> `*lilicorr`, which names no module, and
    `*lilicorr.*`, which matches the head's Linears)."""
    other = entry[:-2] if entry.endswith(".*") else entry + ".*"
    return bool(entries.get(other))


def aimed_groups(ctx: ReportView, key: str) -> dict[Asked, list[Member]]:
    """The dead entries of the list at config `key` grouped by the block vLLM asked the list
    about (what MTP001 reports as one finding each); empty for a list read the usual way."""
    for k, section in sections(ctx):
        if k == key and section.consulted is not None:
            return dead_entries(ctx, section, ModuleNames(ctx.inventory.modules), ["mtp"])[1]
    return {}


def _asked_about(
    consulted: dict[Layer, str | None], meant: list[str], prefixes: list[tuple[Model, str]]
) -> tuple[tuple[Model, str], ...]:
    """The (model, prefix) pairs vLLM asked the list about that the entry's on-disk modules
    belong to: those lying inside the name vLLM compared the entries with (the routed experts
    `mtp.0.ffn.experts.17.w1` inside `mtp.0.ffn.experts`), or, where that name is unknown,
    those the modules' tensors were loaded into."""
    out = []
    for (model, prefix), name in consulted.items():
        if name is not None:
            inside = any(m == name or m.startswith(name + ".") for m in meant)
        else:
            inside = (model, prefix) in prefixes
        if inside:
            out.append((model, prefix))
    return tuple(out)
