"""rewrite-ignore-to-runtime-names (MTP001): give each dead exclusion entry the
runtime-namespace entries vLLM's matcher needs.

The on-disk modules the dead entry names are followed through the probe's weight flow to
the construction prefixes they were loaded into; those prefixes are what the entry meant.
The original entry stays by default: SGLang and other runtimes match on-disk names.
"""

from __future__ import annotations

from ..core.findings import Finding
from ..inventory.model import Inventory
from ..probe.report import ProbeReport
from .plan import Change, PlanOptions

ID = "rewrite-ignore-to-runtime-names"


def plan(
    inventory: Inventory, report: ProbeReport, findings: list[Finding], *, options: PlanOptions | None = None
) -> list[Change]:
    from ..view.exclusions import ModuleNames, ondisk_modules_meant, runtime_prefixes_meant
    from ..view.report_view import ReportView
    from .exclusion_list import exclusion_list, feeders, runtime_entries

    # Entries of a list compared with on-disk block names (evidence.vllm_compares) are
    # ignore-expert-blocks-as-compared's: runtime names in the usual key would not reach it.
    # A dead entry's own finding names it (evidence.matched_as); its consequences recommend
    # this fix too, and are resolved through it.
    dead = [
        f
        for f in findings
        if ID in f.fixes.artifact and (f.evidence or {}).get("matched_as") and not f.evidence.get("vllm_compares")
    ]
    lst = exclusion_list(inventory)
    if not dead or lst is None:
        return []
    ctx = ReportView(inventory, report)
    feed = feeders(ctx)
    modules = ModuleNames(inventory.modules)
    drop_dead = options is not None and options.drop_dead
    changes: list[Change] = []
    drop: list[str] = []
    # A finding is keyed by the entry as vLLM matched it; where vLLM mapped the list into its
    # runtime namespace first, the config spells it differently, and the config's spelling
    # is what names on-disk modules and what --drop-dead must remove.
    usual = report.usual_exclusions
    written = usual.as_written if usual else {}
    for f in dead:
        entry = written.get(f.key, f.key)
        wanted = runtime_prefixes_meant(ctx, entry, ondisk_modules_meant(entry, modules))
        entries, notes = runtime_entries(ctx, lst, wanted, feed, collapse=True)
        # Replaced: everything the entry meant is (or will be) excluded by runtime names.
        replaced = bool(wanted) and not notes
        keep = replaced and not drop_dead
        if entries:
            group = lst.add_change(ID, entries, f"add {', '.join(entries)} for dead entry {entry!r}")
        elif keep or notes:
            # A repeated run has nothing to add; a change that writes nothing still says
            # what is left and why.
            file, key = lst.places[0]
            group = [
                Change(
                    fix=ID,
                    file=file,
                    summary=f"{file}:{key}: nothing to add for dead entry "
                    f"{entry!r}" + (" (runtime names already cover it)" if replaced else ""),
                )
            ]
        else:
            group = []
        if group:
            group[0].notes = notes
            if keep:
                group[0].notes.append(
                    f"kept {entry!r} (runtimes matching on-disk names read it); --drop-dead removes it"
                )
                group[0].leaves.append(f.id)
            changes += group
        if drop_dead and not _used(report, f.key):
            drop.append(entry)
    if drop:
        changes += lst.remove_change(ID, drop, f"drop dead {', '.join(repr(e) for e in drop)}")
    return changes


def _used(report: ProbeReport, entry: str) -> bool:
    """Does any vLLM comparison use the entry (it excludes a layer of some list), or does
    it declare a Linear vLLM builds without asking the config? Such an entry is never
    dropped, whatever finding names it."""
    return any(s.entries.get(entry) or s.undecided.get(entry) for s in report.exclusions)
