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

import click

from .core.errors import BadInput
from .core.findings import RunResult

# Options of `mtplint check` that shape its output, not the lint: not API options.
_CLI_ONLY = frozenset(
    {"path", "formats", "outputs", "output_format", "verbose", "statistics", "color", "repo_root", "quiet", "debug"}
)
# Comma-separated on the command line; a list is accepted here too.
_LISTS = frozenset({"select", "ignore_codes", "with_patches"})


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
    """The option names lint() takes: `mtplint check`'s long options with underscores."""
    return sorted({"ignore", *(n for n in _params() if n != "ignore_codes")})


def lint(path: str | Path, **opts: Any) -> Report:
    """Lint the checkpoint directory `path`. Options as `mtplint check`'s long options with
    underscores (num_speculative_tokens=2, gpu="h100", tensor_parallel_size=8, select=["MTP0"],
    vllm_python=..., fail_on="warning", ...); `mtplint.toml` / `[tool.mtplint]` in the working
    directory and the checkpoint's own `mtplint.toml` apply as they do for the CLI."""
    from .pipeline.entry import exit_code, lint_with_policy, usable_settings

    path = Path(path)
    s = usable_settings(path, _cli_values(opts), announce=False)
    _linted, result, notes = lint_with_policy(path, s)
    base = {f.name: getattr(result, f.name) for f in fields(RunResult)}
    return Report(**base, exit_code=exit_code(result, s["fail_on"]), fail_on=s["fail_on"], notes=notes)


def _params() -> dict[str, click.Parameter]:
    from .cli.check import check_cmd

    return {p.name: p for p in check_cmd.params if p.name and p.name not in _CLI_ONLY}


def _cli_values(opts: dict[str, Any]) -> dict[str, Any]:
    """Keyword options -> the values click would have parsed, through the same parameter types
    (a bad value is BadInput, as the CLI's usage error is exit 2)."""
    from .cli.check import check_cmd

    params = _params()
    opts = dict(opts)
    if "ignore" in opts:
        opts["ignore_codes"] = opts.pop("ignore")
    unknown = sorted(set(opts) - set(params))
    if unknown:
        raise TypeError(f"mtplint.lint() got unknown option(s) {', '.join(unknown)}; known: {', '.join(options())}")
    ctx = click.Context(check_cmd)
    values: dict[str, Any] = {"quiet": True, "formats": (), "outputs": ()}
    for name, value in opts.items():
        if value is None:
            continue
        if name in _LISTS and isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        try:
            values[name] = params[name].type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise BadInput(f"{name}: {exc.message}") from None
    return values
