"""The policy a run's findings pass before they are reported: the project's [[suppress]] tables
(lint/config/suppressions.py) and a --baseline file (lint/pipeline/baseline.py). A suppressed finding
is still reported, as suppressed, with its reason; it never counts for the exit code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config.schema import Settings
from ..config.suppressions import Suppression
from ..core.findings import Finding, RunResult, Suppressed
from ..core.textsafe import terminal_safe
from .baseline import Baseline, check_writable, read_baseline, write_baseline


def apply(result: RunResult, suppressions: tuple[Suppression, ...] | list[Suppression]) -> list[Suppression]:
    """Move the findings a [[suppress]] entry accepts from result.findings to
    result.suppressed and record the unused suppressions on the result; returns those."""
    checkpoint = result.inputs.path
    active = [s for s in suppressions if s.applies_to(checkpoint)]
    used: set[int] = set()
    kept: list[Finding] = []
    for f in result.findings:
        hits = [i for i, s in enumerate(active) if s.matches(f)]
        used.update(hits)
        if hits:
            s = active[hits[0]]
            result.suppressed.append(Suppressed(f, "config", s.reason, f"{s.where()} [[suppress]] entry {s.entry}"))
        else:
            kept.append(f)
    result.findings = kept
    # A suppression of a rule that did not run (--select/--ignore) is not stale, just idle.
    evaluated = evaluated_codes(result)
    unused = [s for i, s in enumerate(active) if i not in used and s.rule in evaluated]
    result.unused_suppressions = [{**s.to_dict(), "message": unused_message(s)} for s in unused]
    return unused


def evaluated_codes(result: RunResult) -> set[str]:
    return {r["code"] for r in result.rules_evaluated} | {f.code for f in result.findings}


def unused_message(s: Suppression) -> str:
    return f"unused suppression [[suppress]] entry {s.entry} ({s.describe()}) in {s.where()}: it matches no finding"


@dataclass
class Policy:
    """What a check run accepts: the project's [[suppress]] entries, a --baseline, and where
    --write-baseline records this run. Built before the lint, so that an unreadable baseline
    or an unwritable target is exit 2 before the probe runs."""

    suppressions: tuple[Suppression, ...] = ()
    baseline: Baseline | None = None
    write_to: Path | None = None
    quiet: bool = False

    @classmethod
    def from_settings(cls, s: Settings) -> Policy:
        write_to = Path(s.output.write_baseline) if s.output.write_baseline else None
        if write_to is not None:
            check_writable(write_to)
        baseline = read_baseline(Path(s.output.baseline)) if s.output.baseline else None
        return cls(tuple(s.lint.suppress or ()), baseline, write_to, bool(s.output.quiet))

    def apply(self, result: RunResult) -> list[str]:
        """Apply to `result` (findings left are the ones that count); returns the lines for
        stderr: unused-suppression warnings always, baseline notes unless quiet."""
        unused = apply(result, self.suppressions)
        warnings = [terminal_safe(f"mtplint: warning: {unused_message(s)}") for s in unused]
        evaluated = evaluated_codes(result)
        notes = self.baseline.apply(result, evaluated) if self.baseline else []
        if self.write_to is not None:
            notes = self._write(self.write_to, result, evaluated)
        return warnings + ([] if self.quiet else notes)

    @staticmethod
    def _write(file: Path, result: RunResult, evaluated: set[str]) -> list[str]:
        # The new baseline records what the project config does not already accept; this run
        # then reads as the next one will with --baseline: nothing new.
        fixed = (result.baseline or {}).get("fixed", [])
        recorded = result.findings + [x.finding for x in result.suppressed if x.kind == "baseline"]
        result.suppressed = [x for x in result.suppressed if x.kind != "baseline"]
        result.findings = recorded
        written = write_baseline(file, recorded, result)
        written.apply(result, evaluated)
        result.baseline = {**(result.baseline or {}), "fixed": fixed}
        line = f"mtplint: wrote baseline {written.file}: {len(written.entries)} finding(s) recorded"
        if fixed:
            line += f", {len(fixed)} entr{'y' if len(fixed) == 1 else 'ies'} of the previous baseline dropped (fixed)"
        return [terminal_safe(line)]
