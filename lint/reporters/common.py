"""What the format modules share: the summary line, the consequence tree, fix commands, locations,
JSON-safe values."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import PurePath
from typing import Any

from ..core.findings import SEVERITIES, SEVERITY_RANK, Finding, RunResult


def severity_counts(findings: list[Finding]) -> dict[str, int]:
    counts = Counter(f.severity for f in findings)
    return {sev: counts.get(sev, 0) for sev in SEVERITIES}


def at_least(severity: str, threshold: str) -> bool:
    return SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK[threshold]


def consequence_tree(findings: list[Finding]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """Split findings into roots and {cause id: consequences}.

    A consequence whose cause is not in this run (filtered out, or a dangling id) stays a root,
    so nothing is ever hidden. Cycles cannot hide findings either: a finding that is its own
    ancestor is promoted to a root.
    """
    ids = {f.id for f in findings}
    by_id = {f.id: f for f in findings}
    children: dict[str, list[Finding]] = {}
    roots: list[Finding] = []
    for f in findings:
        if f.caused_by and f.caused_by in ids and not _in_cycle(f, by_id):
            children.setdefault(f.caused_by, []).append(f)
        else:
            roots.append(f)
    return roots, children


def _in_cycle(f: Finding, by_id: dict[str, Finding]) -> bool:
    seen = {f.id}
    cur = f
    while cur.caused_by and cur.caused_by in by_id:
        cur = by_id[cur.caused_by]
        if cur.id in seen:
            return True
        seen.add(cur.id)
    return False


def location_text(f: Finding) -> str:
    loc = f.location
    text = loc.file
    if loc.tensor:
        text += f":{loc.tensor}"
    if loc.config_key:
        text += f":{loc.config_key}" if not loc.tensor else f" ({loc.config_key})"
    return text


def patch_command(patch_ids: list[str]) -> str:
    return f"MTPLINT_PATCHES={','.join(patch_ids)} vllm serve ..."


def artifact_command(path: str, fix_id: str) -> str:
    # A hub repository is never changed: its fix writes the changed files into --out DIR.
    out = " --out DIR" if str(path).startswith("hf://") else ""
    return f"mtplint fix {shlex.quote(path)} --only {fix_id}{out}"


def fix_commands(f: Finding, path: str) -> list[str]:
    cmds = [f.fixes.serve or patch_command(f.fixes.patches)] if f.fixes.patches else []
    return cmds + [artifact_command(path, a) for a in f.fixes.artifact]


def short_commit(commit: str | None) -> str:
    # Same shape as vLLM's own dev versions ("0.33.0.dev1+g4ba787ec9"), so the two can be matched by eye.
    if not commit:
        return "unknown commit"
    if re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return "g" + commit[:9]
    return commit


def vllm_text(result: RunResult) -> str:
    version = result.vllm.version
    if not version:
        return "vLLM not probed"
    text = f"probed vLLM {version} ({short_commit(result.vllm.commit)})"
    if result.probe is not None and result.probe.cached:
        text += ", cached"
    return text


def libraries_text(result: RunResult) -> str | None:
    """The probed interpreter's transformers and compressed-tensors (the environment's own pins)
    and its torch (the CPU build every environment shares); None when no probe said."""
    libraries = result.vllm.libraries
    if not libraries:
        return None
    named = [f"{n} {libraries[n]}" for n in ("transformers", "compressed-tensors") if n in libraries]
    torch = (
        f"; torch {libraries['torch']} (the shared CPU build, not the release's pin)" if "torch" in libraries else ""
    )
    return f"vLLM {result.vllm.version} probed with {', '.join(named) or 'no transformers'}{torch}"


def plural(n: int, word: str) -> str:
    # "info" is a mass noun: "3 info", not "3 infos".
    return f"{n} {word}" if n == 1 or word == "info" else f"{n} {word}s"


def summary_line(result: RunResult) -> str:
    """One line that agrees with itself: root causes (by severity), their consequences, and
    the findings in all (root causes + consequences)."""
    if not result.findings:
        rules = plural(len(result.rules_evaluated), "rule")
        return f"no findings in {rules}{suppressed_text(result)}; {vllm_text(result)}"
    roots, _ = consequence_tree(result.findings)
    counts = Counter(f.severity for f in roots)
    order = [s for s in SEVERITIES if counts[s]] + sorted(set(counts) - set(SEVERITIES))
    by_severity = ", ".join(plural(counts[s], s) for s in order)
    text = f"{plural(len(roots), 'root cause')} ({by_severity})"
    consequences = len(result.findings) - len(roots)
    if consequences:
        text += f", {plural(consequences, 'consequence')}"
    fired = len({f.code for f in result.findings})
    return (
        f"{text}; {plural(len(result.findings), 'finding')} in {plural(fired, 'rule')}{suppressed_text(result)}; "
        f"{vllm_text(result)}"
    )


def suppressed_text(result: RunResult) -> str:
    """The "; N suppressed" part, when the project's [[suppress]] entries or a baseline accepted findings."""
    accepted = result.suppressed
    if not accepted:
        return ""
    baselined = sum(s.kind == "baseline" for s in accepted)
    by_baseline = f" ({baselined} by the baseline)" if baselined and baselined < len(accepted) else ""
    what = "baselined" if baselined == len(accepted) else "suppressed"
    return f"; {len(accepted)} {what}{by_baseline}"


def checkpoint_name(result: RunResult) -> str:
    return str(result.inputs.path or "checkpoint").rstrip("/") or "/"


def jsonable(value: Any) -> Any:
    """json.dumps default=: evidence and inputs are free-form, and a stray Path, set or tensor
    scalar must not crash a report."""
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError, RuntimeError):  # multi-element tensors
            pass
    return str(value)
