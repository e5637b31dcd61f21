"""The fix session: lint, plan the selected fixes, apply, lint again.

Kept apart from the click command so tests (and other tools) can plan and apply in-process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..findings import SEVERITY_RANK, Finding
from ..session import Linted
from ..session import lint as session_lint
from .catalog import FIXES, Fix
from .plan import Change, Rendered, render


def lint(
    path: Path, s: dict[str, Any], *, fresh: bool = False, progress: Callable[[str], None] | None = None
) -> Linted:
    """`mtplint check`'s pipeline, without runtime patches: an artifact fix must make the
    checkpoint right for the vLLM as it is. fresh: probe again and store the new report."""
    return session_lint(path, s, patches=[], fresh=fresh, progress=progress)


def parse_only(only: str | None) -> list[str] | None:
    """--only ids, validated before anything is probed."""
    if not only:
        return None
    ids = [i.strip() for i in only.split(",") if i.strip()]
    unknown = [i for i in ids if i not in FIXES]
    if unknown or not ids:
        raise BadInput(f"--only: unknown fix id(s) {', '.join(unknown) or repr(only)}; known: {', '.join(FIXES)}")
    return ids


def choose(only: list[str] | None, findings: list[Finding]) -> list[Fix]:
    """The --only fixes, else every registered fix some finding recommends."""
    wanted = set(only) if only is not None else {i for f in findings for i in f.fixes.artifact}
    return [f for f in FIXES.values() if f.id in wanted]  # registry order is plan order


def plan_all(linted: Linted, fixes: list[Fix], options: dict[str, Any]) -> dict[str, list[Change]]:
    return {f.id: f.plan_for(linted.inventory, linted.report, linted.findings, options) for f in fixes}


def plan_fixes(
    before: Linted, only: list[str] | None, drop_dead: bool, fail_on: str
) -> tuple[dict[str, list[Change]], list[Change], set[str], list[Finding]]:
    """The plans of the chosen fixes, their changes, the findings those changes leave in place
    on purpose (kept entries), and the findings at or above fail_on that no change leaves."""
    plans = plan_all(before, choose(only, before.findings), {"drop_dead": drop_dead})
    changes = [c for cs in plans.values() for c in cs]
    leaves = {i for c in changes for i in c.leaves}
    failing = [f for f in blocking(before.findings, fail_on) if f.id not in leaves]
    return plans, changes, leaves, failing


def render_all(root: Path, plans: dict[str, list[Change]]) -> Rendered:
    return render(root, [c for changes in plans.values() for c in changes])


def blocking(findings: list[Finding], fail_on: str) -> list[Finding]:
    return [f for f in findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]]


def unaddressed(findings: list[Finding], fix_ids: set[str]) -> list[Finding]:
    """Findings no planned fix resolves, directly or through the finding they follow from."""
    by_id = {f.id: f for f in findings}
    resolved: dict[str, bool] = {}

    def ok(f: Finding, depth: int = 0) -> bool:
        if f.id not in resolved:
            cause = by_id.get(f.caused_by or "")
            resolved[f.id] = bool(set(f.fixes.artifact) & fix_ids) or (
                cause is not None and depth < 8 and ok(cause, depth + 1)
            )
        return resolved[f.id]

    return [f for f in findings if not ok(f)]
