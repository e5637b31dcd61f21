"""The Python API: `mtplint.lint(path, **options) -> Report`.

The same pipeline as `mtplint check`: settings files, the same option types and usage checks,
the probe, the rule checks, [[suppress]] and --baseline. Errors are the CLI's: BadInput (the
CLI's exit 2) and ProbeFailure / MtplintError (exit 3), raised instead of printed.

    import mtplint

    report = mtplint.lint("./ckpt", gpu="h100", num_speculative_tokens=2)
    for f in report.findings:
        print(f.code, f.message)
    report.exit_code   # what `mtplint check` would exit with
    report.to_json()   # the `--format json` document (docs/report-json.md)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .config.schema import DERIVED, LINT_FIELDS, checked
from .config.settings import ALIASES, Options
from .core.errors import BadInput
from .core.findings import RunResult


@dataclass
class Report(RunResult):
    """A lint's RunResult (findings, rules evaluated, vLLM, inputs, suppressions) plus the
    exit code `mtplint check` would return for it."""

    exit_code: int = 0
    fail_on: str = "error"
    notes: list[str] = field(default_factory=list)  # what the CLI prints on stderr (suppressions, baseline)

    def to_dict(self) -> dict[str, Any]:
        from .reporters.json_report import build_report

        return build_report(self)

    def to_json(self) -> str:
        from .reporters.json_report import render_json

        return render_json(self)

    def render(self, fmt: str = "text", **kwargs: Any) -> str:
        """The report in a CLI format: text, json, junit, sarif, github (keywords as reporters.render)."""
        from .engine.loader import load_rules
        from .reporters import render

        kwargs.setdefault("fail_on", self.fail_on)
        return render(self, fmt, load_rules(), **kwargs)


def options() -> list[str]:
    """The option names lint() takes: the LintSettings fields a caller gives (lint/config/schema.py),
    and the command line's spelling of one (with_patches)."""
    return sorted((LINT_FIELDS - DERIVED) | {"with_patches"})


def lint(path: str | Path, **opts: Any) -> Report:
    """Lint the checkpoint directory `path`. Options are Settings fields (num_speculative_tokens=2,
    gpu="h100", tensor_parallel_size=8, select=["MTP0"], vllm_python=..., fail_on="warning", ...),
    each held to the check a settings file's value is; `mtplint.toml` / `[tool.mtplint]` in the
    working directory and the checkpoint's own `mtplint.toml` apply as they do for the CLI."""
    from .pipeline.entry import exit_code, lint_with_policy, usable_settings

    path = Path(path)
    s = usable_settings(path, settings_options(opts), announce=False)
    _linted, result, notes = lint_with_policy(path, s)
    base = {f.name: getattr(result, f.name) for f in fields(RunResult)}
    return Report(**base, exit_code=exit_code(result, s.lint.fail_on), fail_on=s.lint.fail_on, notes=notes)


def settings_options(opts: Options) -> dict[str, Any]:
    """Keyword options, each through its setting's check (a bad value is BadInput, as the CLI's
    usage error is exit 2); an unknown keyword is a TypeError, as for any Python function."""
    unknown = sorted(set(opts) - set(options()))
    if unknown:
        raise TypeError(f"mtplint.lint() got unknown option(s) {', '.join(unknown)}; known: {', '.join(options())}")
    values: dict[str, Any] = {"quiet": True}
    for name, value in opts.items():
        if value is None:
            continue
        field = ALIASES.get(name, name)
        try:
            values[field] = checked(field, value)
        except ValueError as why:
            raise BadInput(f"{name} must be {why}, not {value!r:.80}") from None
    return values
