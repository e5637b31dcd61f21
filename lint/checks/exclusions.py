"""Exclusion (ignore/exclude) entries that vLLM's own matcher applies to no runtime prefix."""

from __future__ import annotations

import re
from typing import Any

from ..engine.context import Context, Hit
from . import check


def _ondisk_modules_meant(entry: str, modules: list[str]) -> list[str]:
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
        return [m for m in modules if rx.match(m)]
    if "*" in entry or "?" in entry:
        import fnmatch

        return [m for m in modules if fnmatch.fnmatch(m, entry)]
    return [m for m in modules if m == entry or m.endswith("." + entry)]


def _runtime_prefix_index(ctx: Context) -> dict[str, dict[tuple[str, str], None]]:
    """On-disk module -> construction prefixes its tensors were (or failed to be) loaded into."""
    cached = ctx.__dict__.get("_ondisk_to_runtime_index")
    if cached is None:
        cached = {}
        for ondisk, model, prefix in ctx.ondisk_to_runtime:
            cached.setdefault(ondisk, {})[(model, prefix)] = None
        ctx.__dict__["_ondisk_to_runtime_index"] = cached
    return cached


def _runtime_prefixes_for(ctx: Context, ondisk: list[str]) -> list[tuple[str, str]]:
    index = _runtime_prefix_index(ctx)
    out: dict[tuple[str, str], None] = {}
    for module in ondisk:
        out.update(index.get(module, {}))
    return list(out)


def _suggest(prefixes: list[tuple[str, str]]) -> str:
    names = sorted({p for _m, p in prefixes})
    if not names:
        return ""
    layers = {m.group(0) for n in names if (m := re.match(r"^(model\.)?(mtp\.)?layers\.\d+\.", n))}
    if len(names) > 3 and len(layers) == 1:
        return "re:^" + re.escape(layers.pop())
    return ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")


@check
def dead_exclusion_entries(ctx: Context, options: dict) -> list[Hit]:
    ex: dict[str, Any] = ctx.report.get("exclusions") or {}
    entries: dict[str, list[str]] = ex.get("entries", {})
    if not entries or ctx.report.get("construction_errors") or ctx.report.get("config_error"):
        # A model that failed to build recorded only part of its prefixes: an entry's
        # runtime match cannot be judged (MTP009 reports the failure).
        return []
    key = ctx.inventory.declared.exclusion_key or f"quantization_config.{ex.get('attr')}"
    ondisk_modules = sorted(ctx.inventory.modules)
    hits = []
    written = ex.get("as_written", {})
    for entry, matched in entries.items():
        if matched:
            continue
        meant = _ondisk_modules_meant(written.get(entry, entry), ondisk_modules)
        prefixes = _runtime_prefixes_for(ctx, meant)
        markers = [m.lower() for m in options.get("mtp_markers", ["mtp"])]
        mtp_intent = any(m in entry.lower() for m in markers) or any(
            m.startswith("mtp.") or ".mtp." in m for m in meant)
        # A dead entry aimed at the MTP block, or written for modules that exist on disk,
        # changes what vLLM builds; any other dead entry is only clutter.
        is_error = (options.get("error_when_mtp_looking", True) and mtp_intent) or (
            options.get("error_when_on_disk_name", True) and bool(meant))
        hit = Hit(
            key=entry,
            fields={"entry": written.get(entry, entry), "key": key,
                    "suggestion": _suggest(prefixes) or "none found"},
            location=ctx.config_location(key),
            severity="error" if is_error else "warning",
            evidence={"matcher": ex.get("matcher"), "matched_as": entry, "ondisk_modules_matched": meant[:8],
                      "ondisk_modules_matched_count": len(meant),
                      "runtime_prefixes": [f"{m}:{p}" for m, p in prefixes][:12],
                      "intent": "mtp" if mtp_intent else None},
        )
        if mtp_intent:
            ctx.causes.setdefault("mtp-exclusion", f"MTP001:{entry}")
        for model, prefix in prefixes:
            ctx.causes.setdefault(f"exclusion-missed:{model}:{prefix}", f"MTP001:{entry}")
        hits.append(hit)
    return hits
