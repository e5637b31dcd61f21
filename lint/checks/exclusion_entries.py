"""Exclusion (ignore/exclude) entries that vLLM's own matcher applies to no runtime prefix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..core import mtp_layout
from ..probe.report import ExclusionSection
from . import check
from .context import Cause, Context, Hit, is_quantized_method


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


def _runtime_prefix_index(ctx: Context) -> dict[str, dict[tuple[str, str], None]]:
    """On-disk module -> construction prefixes its tensors were (or failed to be) loaded into."""
    cached = ctx.__dict__.get("_ondisk_to_runtime_index")
    if cached is None:
        cached = {}
        for ondisk, model, prefix in ctx.ondisk_to_runtime:
            cached.setdefault(ondisk, {})[(model, prefix)] = None
        ctx.__dict__["_ondisk_to_runtime_index"] = cached
    return cached


def _prefixes_of_paths_named(ctx: Context, entry: str) -> list[tuple[str, str]]:
    """Construction prefixes of the modules whose path (not prefix) the entry names. A module
    nothing on disk feeds (the MTP head GLM-5 does not ship) gives the entry no on-disk name to
    go by; its path, `model.layers.78.shared_head.head`, is what an author writes, while vLLM
    compares `model.layers.78.head`."""
    cached = ctx.__dict__.get("_paths_to_prefixes")
    if cached is None:
        by_path: dict[str, dict[tuple[str, str], None]] = {}
        for d in ctx.report.decisions:
            if d.module and d.module != d.prefix:
                by_path.setdefault(d.module, {})[(d.model, d.prefix)] = None
        cached = (ModuleNames(by_path), by_path)
        ctx.__dict__["_paths_to_prefixes"] = cached
    names, by_path = cached
    out: dict[tuple[str, str], None] = {}
    for path in ondisk_modules_meant(entry, names):
        out.update(by_path[path])
    return list(out)


def runtime_prefixes_meant(ctx: Context, entry: str, meant: list[str]) -> list[tuple[str, str]]:
    """The construction prefixes a dead entry most likely meant: those its on-disk modules
    (`meant`) were loaded into, else those of the runtime module paths it names."""
    return runtime_prefixes_for(ctx, meant) or _prefixes_of_paths_named(ctx, entry)


def runtime_prefixes_for(ctx: Context, ondisk: list[str]) -> list[tuple[str, str]]:
    index = _runtime_prefix_index(ctx)
    out: dict[tuple[str, str], None] = {}
    for module in ondisk:
        out.update(index.get(module, {}))
    return list(out)


def compared_names(ctx: Context, prefixes: Iterable[tuple[str, str]]) -> list[str]:
    """The names vLLM's matcher compares an entry with to decide these layers (a
    compressed-tensors FusedMoE: `{prefix}.0.{gate,up,down}_proj`), the prefix itself
    where the probe recorded none."""
    by_layer = {(d.model, d.prefix): d.compared for d in ctx.report.decisions if d.compared}
    out: dict[str, None] = {}
    for mp in prefixes:
        out.update(dict.fromkeys(by_layer.get(mp) or [mp[1]]))
    return list(out)


def _suggest(ctx: Context, prefixes: list[tuple[str, str]]) -> str:
    names = sorted(compared_names(ctx, prefixes))
    if not names:
        return ""
    layers = {g for n in names if (g := mtp_layout.layer_group(n))}
    if len(names) > 3 and len(layers) == 1:
        return "re:^" + re.escape(layers.pop())
    return ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")


def _section_key(ctx: Context, first: ExclusionSection, section: ExclusionSection) -> str:
    """The config key a section's entries were read from."""
    declared = ctx.inventory.declared.exclusion_key
    if section.config_key:
        # A list the probed config reads besides its usual one (DeepseekV4FP8Config's
        # `ignore` next to Fp8Config's `ignored_layers`): same body, its own leaf.
        body = declared.rsplit(".", 1)[0] if declared and "." in declared else "quantization_config"
        return f"{body}.{section.config_key}"
    return declared or f"quantization_config.{first.attr}"


def sections(ctx: Context) -> list[tuple[str, ExclusionSection]]:
    """(config key, section) for every exclusion list the probe evaluated, but a list vLLM
    filled from the checkpoint itself (the config declared none): nobody wrote its entries."""
    listed = ctx.exclusion_sections()
    return [(_section_key(ctx, listed[0], s), s) for s in listed if not s.filled_by]


@dataclass(frozen=True)
class DeadEntryOptions:
    # A dead entry is an error when it looks aimed at the MTP block (any of these substrings,
    # case-insensitive) or matches a safetensors key of the checkpoint; otherwise a warning.
    mtp_markers: list[str] = field(default_factory=lambda: ["mtp"])
    error_when_mtp_looking: bool = True
    error_when_on_disk_name: bool = True
    # An entry that looks aimed at the MTP block (markers above, or `layers\.4` for MTP
    # layer 46) and excludes at least this share of the target's layers is over-broad.
    overbroad_target_share: float = 0.05


DEAD = "matches no module vLLM builds for the target or the MTP draft"


@check(fields=("key", "entry", "verdict", "suggestion"), options=DeadEntryOptions)
def dead_exclusion_entries(ctx: Context, options: DeadEntryOptions) -> list[Hit]:
    """Dead entries, and (same rule, its own verdict) MTP-looking entries that exclude a
    large share of the target (catalog MTPL-025)."""
    overbroad = overbroad_entries(ctx, OverbroadOptions(options.mtp_markers, options.overbroad_target_share))
    return _dead(ctx, options) + overbroad


def _dead(ctx: Context, options: DeadEntryOptions) -> list[Hit]:
    keyed = sections(ctx)
    if not any(s.entries for _k, s in keyed) or not ctx.every_model_built:
        # A model that failed to build recorded only part of its prefixes: an entry's
        # runtime match cannot be judged (MTP009 reports the failure).
        return []
    ondisk_modules = ModuleNames(ctx.inventory.modules)
    markers = [m.lower() for m in options.mtp_markers]
    hits = []
    for key, section in keyed:
        hits += _dead_in_section(ctx, options, section, key, ondisk_modules, markers)
    return hits


Member = tuple[str, list[str], list[tuple[str, str]], bool]  # entry, on-disk modules meant, prefixes, mtp intent
Asked = tuple[tuple[str, str], ...]


def _dead_entries(
    ctx: Context, ex: ExclusionSection, ondisk_modules: ModuleNames, markers: list[str]
) -> tuple[list[Member], dict[Asked, list[Member]]]:
    """A section's dead entries: (judged one by one, grouped by the block vLLM asked about).

    The groups exist where the config reads the list only for some layers, through a method
    of its own (`consulted`); entries naming modules vLLM never asks that list about are
    inert and in neither.
    """
    entries = ex.entries
    # {"model:prefix" vLLM asked the list about: the name it compared the entries with}.
    consulted = ex.consulted
    written = ex.as_written
    single: list[Member] = []
    aimed: dict[Asked, list[Member]] = {}
    excluded = {tuple(h.split(":", 1)) for hits in entries.values() for h in hits}
    for entry, matched in entries.items():
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


def aimed_groups(ctx: Context, key: str) -> dict[Asked, list[Member]]:
    """The dead entries of the list at config `key` grouped by the block vLLM asked the list
    about (what MTP001 reports as one finding each); empty for a list read the usual way."""
    for k, section in sections(ctx):
        if k == key and section.consulted is not None:
            return _dead_entries(ctx, section, ModuleNames(ctx.inventory.modules), ["mtp"])[1]
    return {}


def _dead_in_section(
    ctx: Context,
    options: DeadEntryOptions,
    ex: ExclusionSection,
    key: str,
    ondisk_modules: ModuleNames,
    markers: list[str],
) -> list[Hit]:
    consulted = ex.consulted
    hits = []
    written = ex.as_written
    single, aimed = _dead_entries(ctx, ex, ondisk_modules, markers)
    for entry, meant, prefixes, mtp_intent in single:
        # A dead entry aimed at the MTP block, or written for modules that exist on disk,
        # changes what vLLM builds; any other dead entry is only clutter.
        is_error = (options.error_when_mtp_looking and mtp_intent) or (options.error_when_on_disk_name and bool(meant))
        hit = Hit(
            key=entry,
            fields={
                "entry": written.get(entry, entry),
                "key": key,
                "verdict": DEAD,
                "suggestion": f"runtime names it most likely meant: {_suggest(ctx, prefixes) or 'none found'}",
            },
            location=ctx.config_location(key),
            severity="error" if is_error else "warning",
            artifact_fixes=["rewrite-ignore-to-runtime-names"],
            evidence={
                "matcher": ex.matcher,
                "matched_as": entry,
                "ondisk_modules_matched": meant[:8],
                "ondisk_modules_matched_count": len(meant),
                "runtime_prefixes": [f"{m}:{p}" for m, p in prefixes][:12],
                "intent": "mtp" if mtp_intent else None,
            },
            provides=_provides(mtp_intent, prefixes),
        )
        hits.append(hit)
    for asked, members in aimed.items():
        hits.append(_aimed_hit(ctx, options, ex, key, asked, members, consulted or {}))
    return hits


def _asked_about(
    consulted: dict[str, str | None], meant: list[str], prefixes: list[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """The (model, prefix) pairs vLLM asked the list about that the entry's on-disk modules
    belong to: those lying inside the name vLLM compared the entries with (the routed experts
    `mtp.0.ffn.experts.17.w1` inside `mtp.0.ffn.experts`), or, where that name is unknown,
    those the modules' tensors were loaded into."""
    out = []
    for where, name in consulted.items():
        model, _, prefix = where.partition(":")
        if name is not None:
            inside = any(m == name or m.startswith(name + ".") for m in meant)
        else:
            inside = (model, prefix) in prefixes
        if inside:
            out.append((model, prefix))
    return tuple(out)


def _aimed_hit(
    ctx: Context,
    options: DeadEntryOptions,
    ex: ExclusionSection,
    key: str,
    asked: tuple[tuple[str, str], ...],
    members: list[tuple[str, list[str], list[tuple[str, str]], bool]],
    consulted: dict[str, str | None],
) -> Hit:
    """One finding for the dead entries that name modules vLLM asked the list about, and
    miss the name it compared them with."""
    first, last = members[0][0], members[-1][0]
    shown = first if len(members) == 1 else f"{first}' and {len(members) - 1} more like it, up to '{last}"
    compared = sorted({consulted.get(f"{m}:{p}") or p for m, p in asked})
    where = ", ".join(f"{m}:{p}" for m, p in asked[:4]) + (" ..." if len(asked) > 4 else "")
    via = ex.via or "the quant config"
    mtp_intent = any(m[3] for m in members)
    meant = [mod for m in members for mod in m[1]]
    is_error = (options.error_when_mtp_looking and mtp_intent) or options.error_when_on_disk_name
    return Hit(
        key=first,
        fields={
            "entry": shown,
            "key": key,
            "verdict": DEAD,
            "suggestion": "runtime names it most likely meant: "
            f"{', '.join(compared[:4])}{' ...' if len(compared) > 4 else ''}: the only "
            f"name{'s' if len(compared) > 1 else ''} {via} compares these entries with, "
            f"for {where}",
        },
        location=ctx.config_location(key),
        severity="error" if is_error else "warning",
        # rewrite-ignore-to-runtime-names writes runtime names into the usual exclusion key;
        # this list is compared with on-disk names by a method of its own, so its fix writes
        # the compared names into this list (only where vLLM recorded every one of them).
        artifact_fixes=["ignore-expert-blocks-as-compared"] if all(consulted.get(f"{m}:{p}") for m, p in asked) else [],
        evidence={
            "matcher": ex.matcher,
            "via": via,
            "matched_as": first,
            "entries": [m[0] for m in members][:12],
            "entries_count": len(members),
            "vllm_compares": {f"{m}:{p}": consulted.get(f"{m}:{p}") for m, p in asked[:12]},
            "ondisk_modules_matched": meant[:8],
            "ondisk_modules_matched_count": len(meant),
            "runtime_prefixes": [f"{m}:{p}" for m, p in asked][:12],
            "intent": "mtp" if mtp_intent else None,
        },
        provides=_provides(mtp_intent, asked),
    )


def _provides(mtp_intent: bool, prefixes: Iterable[tuple[str, str]]) -> list[Cause]:
    """A dead entry meant for the MTP block explains a draft built quantized; one meant for
    a runtime prefix explains what that prefix was built with."""
    causes = [Cause("mtp-exclusion")] if mtp_intent else []
    return causes + [Cause("exclusion-missed", (model, prefix)) for model, prefix in prefixes]


@dataclass(frozen=True)
class UndeclaredLinearOptions:
    # Module classes vLLM builds without consulting the quant config (vLLM 0.33.0:
    # `eh_proj = nn.Linear(2 * hidden, hidden)` in deepseek_mtp.py, glm4_moe_mtp.py,
    # glm4_moe_lite_mtp.py, step3p5_mtp.py, hy_v3_mtp.py; `input_proj` in mimo_mtp.py;
    # `mtp_linear_proj` in ernie_mtp.py). #35041 / #48506 route `eh_proj` through quant_config.
    plain_classes: list[str] = field(default_factory=lambda: ["Linear"])


@check(fields=("module", "key", "format"), options=UndeclaredLinearOptions)
def undeclared_unquantized_mtp_linear(ctx: Context, options: UndeclaredLinearOptions) -> list[Hit]:
    """Draft Linears vLLM builds without asking the quant config, fed unquantized tensors,
    that no exclusion entry declares, under a config that quantizes other layers."""
    if ctx.report.quant is None or ctx.report.quant.config_class is None or not ctx.built_ok("draft"):
        return []
    if not any(is_quantized_method(d.method) for d in ctx.report.decisions):
        return []
    declared = {h for s in ctx.exclusion_sections() for hits in s.undecided.values() for h in hits}
    keyed = sections(ctx)
    key = keyed[0][0] if keyed else (ctx.inventory.declared.exclusion_key or "quantization_config")
    fed_by: dict[str, list[str]] = {}
    for tensor, params in ctx.fed("draft").items():
        for p in params:
            fed_by.setdefault(p.rsplit(".", 1)[0], []).append(tensor)
    modules = sorted(
        {p.rsplit(".", 1)[0] for p, info in ctx.params("draft").items() if info.module_class in options.plain_classes}
    )
    hits = []
    for module in modules:
        tensors = fed_by.get(module, [])
        formats = [ctx.disk_format(t) for t in tensors]
        if not tensors or any(f is None or f.quantized for f in formats) or f"draft:{module}" in declared:
            continue  # unfed (MTP005), quantized on disk (MTP003), or declared
        ondisk = sorted({t.rsplit(".", 1)[0] for t in tensors})
        hits.append(
            Hit(
                key=module,
                fields={"module": module, "key": key, "format": "unquantized"},
                location=ctx.config_location(key),
                severity="info",
                basis="knowledge",
                evidence={
                    "model": "draft",
                    "module": module,
                    "ondisk_modules": ondisk,
                    "tensors": sorted(tensors)[:4],
                    "quant_config": ctx.report.quant.config_class,
                },
            )
        )
    return hits


@dataclass(frozen=True)
class OverbroadOptions:
    mtp_markers: list[str] = field(default_factory=lambda: ["mtp"])
    # An MTP-looking entry is over-broad when it excludes at least this share of the target's
    # layers (those vLLM asked the quant config about).
    target_share: float = 0.05


_LAYER_NUMBER = re.compile(r"layers\\?\.(\d+)")


def _mtp_layer_numbers(ctx: Context) -> set[str]:
    return {m.group(1) for d in ctx.decisions("draft") if (m := _LAYER_NUMBER.search(d.prefix))}


def _aimed_at_mtp(entry: str, markers: list[str], mtp_numbers: set[str]) -> bool:
    r"""The entry names an MTP marker, or a layer number the MTP layer's index starts with
    (`layers\.4` for layer 46: the author's regex stopped too early)."""
    if any(m in entry.lower() for m in markers):
        return True
    return any(n.startswith(m.group(1)) for m in _LAYER_NUMBER.finditer(entry) for n in mtp_numbers)


def overbroad_entries(ctx: Context, options: OverbroadOptions) -> list[Hit]:
    """MTP-looking entries that exclude a large share of the target's layers."""
    target = {d.prefix for d in ctx.decisions("target")}
    if not target:
        return []
    markers = [m.lower() for m in options.mtp_markers]
    mtp_numbers = _mtp_layer_numbers(ctx)
    mtp_roots = sorted({g for d in ctx.decisions("draft") if (g := mtp_layout.layer_group(d.prefix))})
    hits = []
    for key, section in sections(ctx):
        for entry, matched in section.entries.items():
            written = section.as_written.get(entry, entry)
            hit_target = sorted({h.split(":", 1)[1] for h in matched if h.startswith("target:")})
            share = len(hit_target) / len(target)
            if share < options.target_share or not _aimed_at_mtp(written, markers, mtp_numbers):
                continue
            scoped = ", ".join(("re:^" + re.escape(r)) if written.startswith("re:") else r for r in mtp_roots)
            hits.append(
                Hit(
                    key=entry,
                    fields={
                        "entry": written,
                        "key": key,
                        "verdict": f"looks aimed at the MTP block but also excludes {share:.0%} of the "
                        f"target's layers ({len(hit_target)} of {len(target)}, e.g. {hit_target[0]}), "
                        "which vLLM then builds unquantized",
                        "suggestion": f"scope it to the MTP block: {scoped or 'the MTP layer prefix'}",
                    },
                    location=ctx.config_location(key),
                    severity="error",
                    evidence={
                        "matcher": section.matcher,
                        "matched_as": entry,
                        "target_share": round(share, 4),
                        "target_layers_matched": hit_target[:12],
                        "target_layers_matched_count": len(hit_target),
                        "target_layers": len(target),
                        "intent": "mtp",
                    },
                    provides=[Cause("exclusion-overbroad", ("target", p)) for p in hit_target],
                )
            )
    return hits
