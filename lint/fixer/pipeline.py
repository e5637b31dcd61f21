"""The fix session: lint, plan the selected fixes, apply, lint again.

Kept apart from the click command so tests (and other tools) can plan and apply in-process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config.schema import Settings
from ..core.errors import BadInput, MtplintError
from ..core.findings import SEVERITY_RANK, Finding
from ..pipeline.session import Linted
from ..pipeline.session import lint as session_lint
from .catalog import FIXES, Fix
from .guard import Journal, new_errors
from .plan import Change, PlanOptions, Rendered, render


def lint(
    path: Path,
    s: Settings,
    *,
    fresh: bool = False,
    progress: Callable[[str], None] | None = None,
    inventory: Any = None,
) -> Linted:
    """`mtplint check`'s pipeline, without runtime patches: an artifact fix must make the
    checkpoint right for the vLLM as it is. fresh: probe again and store the new report.
    inventory: lint this one instead of reading PATH (a hub fix's files over its snapshot)."""
    return session_lint(path, s, patches=[], fresh=fresh, progress=progress, inventory=inventory)


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


def plan_all(linted: Linted, fixes: list[Fix], options: PlanOptions) -> dict[str, list[Change]]:
    return {f.id: f.plan_for(linted.inventory, linted.report, linted.findings, options) for f in fixes}


def plan_fixes(
    before: Linted, only: list[str] | None, drop_dead: bool, fail_on: str
) -> tuple[dict[str, list[Change]], list[Change], set[str], list[Finding]]:
    """The plans of the chosen fixes, their changes, the findings those changes leave in place
    on purpose (kept entries), and the findings at or above fail_on that no change leaves."""
    plans = plan_all(before, choose(only, before.findings), PlanOptions(drop_dead=drop_dead))
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


# --- keep a fix only when the re-lint adds no error ------------------------------------------


class Target(Protocol):
    """Where a fix is written: the checkpoint itself, or a hub fix's --out directory."""

    def render(self, changes: list[Change]) -> Rendered:
        """The changes over the target's current state."""

    def write(self, rendered: Rendered) -> Journal:
        """Write, returning what puts the target back."""

    def relint(self) -> Linted:
        """A fresh lint of the target's current state."""


@dataclass
class Verdict:
    """One write and its re-lint: the fixes written, and the errors they add (or the re-lint's failure)."""

    fix_ids: list[str]
    changes: list[Change]
    after: Linted | None
    added: list[Finding] = field(default_factory=list)
    failure: str | None = None

    @property
    def harmful(self) -> bool:
        return self.failure is not None or bool(self.added)


@dataclass
class Outcome:
    final: Linted  # the lint of what was kept (the lint before, when nothing was)
    kept: list[Verdict]
    rolled_back: list[Verdict]
    wrote: bool  # anything was written at all


def attempt(target: Target, before: Linted, fix_ids: list[str], changes: list[Change]) -> Verdict | None:
    """Write the changes, lint again, keep them only when no error is new; None: nothing to write.
    A re-lint that fails, or is interrupted, also puts the files back: nothing unverified is kept."""
    rendered = target.render(changes)
    if not rendered.json and not rendered.shards:
        return None
    journal = target.write(rendered)
    try:
        after = target.relint()
    except MtplintError as e:
        journal.restore()
        return Verdict(fix_ids, changes, None, failure=e.one_line())
    except BaseException:
        journal.restore()
        raise
    added = new_errors(before.findings, after.findings, changes)
    if added:
        journal.restore()
    else:
        journal.discard()
    return Verdict(fix_ids, changes, after, added)


def apply_checked(
    target: Target, before: Linted, plans: dict[str, list[Change]], say: Callable[[str], None]
) -> Outcome:
    """All fixes in one write and one re-lint; when that adds an error and more than one fix
    wrote, each fix again on top of the ones kept so far, in plan order (one re-lint per fix):
    the fix whose write adds the error is rolled back, the others are kept."""
    groups = [(fid, cs) for fid, cs in plans.items() if cs]
    first = attempt(target, before, [fid for fid, _ in groups], [c for _, cs in groups for c in cs])
    if first is None:
        return Outcome(before, [], [], wrote=False)
    if not first.harmful:
        assert first.after is not None
        return Outcome(first.after, [first], [], wrote=True)
    if len(groups) == 1:
        return Outcome(before, [], [first], wrote=True)
    say(f"the fixes together add {_what(first)}: rolled back; trying each fix on its own")
    final, kept, rolled = before, [], []
    for fid, cs in groups:
        v = attempt(target, before, [fid], cs)
        if v is None:
            continue
        if v.harmful:
            rolled.append(v)
        else:
            assert v.after is not None
            final = v.after
            kept.append(v)
    return Outcome(final, kept, rolled, wrote=True)


def _what(v: Verdict) -> str:
    return "a re-lint failure" if v.failure is not None else f"{len(v.added)} new error(s)"
