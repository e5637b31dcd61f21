"""The pipeline as `mtplint check`, `mtplint check A B ...`, the Python API and `mtplint verify` run it
for one checkpoint: settings judged before the probe, the lint, then [[suppress]] and --baseline, and
the exit code the findings left give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.schema import Settings
from ..config.settings import Options, load_and_announce
from ..core.errors import EXIT_FINDINGS, EXIT_OK
from ..core.findings import SEVERITY_RANK
from .draft import check_usage as check_draft_usage
from .reference import check_usage as check_reference_usage


def usable_settings(path: Path, opts: Options, *, announce: bool = True) -> Settings:
    """The settings (command line over project file over checkpoint file), judged as far as
    they can be before probing: a usage error is exit 2 now, not after the probe."""
    from ..config.settings import load_settings
    from ..config.usage import check_outputs, check_settings, check_timeout
    from ..engine.loader import load_rules

    check_timeout(opts.get("probe_timeout"))  # as given: the merged settings read a 0 as "not set"
    s = load_and_announce(path, opts) if announce else load_settings(path, opts)
    rules = load_rules()
    check_settings(s.lint, rules, {c: r.name for c, r in rules.items()})
    check_draft_usage(s.lint, 1)
    check_reference_usage(s.lint, 1)
    check_outputs(list(s.output.formats or ["text"]), list(s.output.outputs))
    return s


def lint_with_policy(path: Path, s: Settings, progress: Any = None) -> tuple[Any, Any, list[str]]:
    """The lint, then [[suppress]] and --baseline: (linted, result, lines for stderr). What
    `mtplint check` and the Python API (mtplint.lint) share."""
    from ..pipeline.session import lint
    from .policy import Policy

    policy = Policy.from_settings(s)  # before the probe: an unreadable --baseline is exit 2 at once
    linted = lint(path, s, progress=progress)
    result = linted.result()
    result.inputs = result.inputs.replace(settings_files=tuple(s.lint.settings_files))
    notes = policy.apply(result)  # [[suppress]] and --baseline: the findings left decide the exit code
    return linted, result, notes


def exit_code(result: Any, fail_on: str) -> int:
    worst = max((SEVERITY_RANK[f.severity] for f in result.findings), default=-1)
    return EXIT_FINDINGS if worst >= SEVERITY_RANK[fail_on] else EXIT_OK
