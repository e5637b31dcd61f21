"""Exclusion (ignore/exclude) entries that vLLM's own matcher applies to no runtime prefix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..core import mtp_layout
from ..probe.report import ExclusionSection, Layer, Model
from ..view.exclusions import (
    ModuleNames,
    compared_names,
    dead_entries,
    sections,
)
from ..view.report_view import is_quantized_method
from . import check
from .context import Cause, Context, Hit


def _suggest(ctx: Context, prefixes: list[tuple[Model, str]]) -> str:
    names = sorted(compared_names(ctx, prefixes))
    if not names:
        return ""
    layers = {g for n in names if (g := mtp_layout.layer_group(n))}
    if len(names) > 3 and len(layers) == 1:
        return "re:^" + re.escape(layers.pop())
    return ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")


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
# A separate draft's own list (`--draft`): vLLM matches it against the draft's layers only.
DEAD_IN_DRAFT = "matches no module vLLM builds for this draft"


def _dead_verdict(ctx: Context) -> str:
    return DEAD_IN_DRAFT if ctx.inputs.separate_draft else DEAD


@check(
    fields=("key", "entry", "verdict", "suggestion"),
    options=DeadEntryOptions,
    fixes=("rewrite-ignore-to-runtime-names", "ignore-expert-blocks-as-compared"),
)
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
    single, aimed = dead_entries(ctx, ex, ondisk_modules, markers)
    for entry, meant, prefixes, mtp_intent in single:
        # A dead entry aimed at the MTP block, or written for modules that exist on disk,
        # changes what vLLM builds; any other dead entry is only clutter.
        is_error = (options.error_when_mtp_looking and mtp_intent) or (options.error_when_on_disk_name and bool(meant))
        hit = Hit(
            key=entry,
            fields={
                "entry": written.get(entry, entry),
                "key": key,
                "verdict": _dead_verdict(ctx),
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


def _aimed_hit(
    ctx: Context,
    options: DeadEntryOptions,
    ex: ExclusionSection,
    key: str,
    asked: tuple[tuple[Model, str], ...],
    members: list[tuple[str, list[str], list[tuple[Model, str]], bool]],
    consulted: dict[Layer, str | None],
) -> Hit:
    """One finding for the dead entries that name modules vLLM asked the list about, and
    miss the name it compared them with."""
    first, last = members[0][0], members[-1][0]
    shown = first if len(members) == 1 else f"{first}' and {len(members) - 1} more like it, up to '{last}"
    compared = sorted({consulted.get(Layer(m, p)) or p for m, p in asked})
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
            "verdict": _dead_verdict(ctx),
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
        artifact_fixes=["ignore-expert-blocks-as-compared"]
        if all(consulted.get(Layer(m, p)) for m, p in asked)
        else [],
        evidence={
            "matcher": ex.matcher,
            "via": via,
            "matched_as": first,
            "entries": [m[0] for m in members][:12],
            "entries_count": len(members),
            "vllm_compares": {f"{m}:{p}": consulted.get(Layer(m, p)) for m, p in asked[:12]},
            "ondisk_modules_matched": meant[:8],
            "ondisk_modules_matched_count": len(meant),
            "runtime_prefixes": [f"{m}:{p}" for m, p in asked][:12],
            "intent": "mtp" if mtp_intent else None,
        },
        provides=_provides(mtp_intent, asked),
    )


def _provides(mtp_intent: bool, prefixes: Iterable[tuple[Model, str]]) -> list[Cause]:
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
        if not tensors or any(f is None or f.quantized for f in formats) or Layer("draft", module) in declared:
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
            hit_target = sorted({h.prefix for h in matched if h.model == "target"})
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
