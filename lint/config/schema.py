"""Every setting of a lint, declared once: its type and default, the key a settings file spells it
with, the check a value must pass, and who may set it (`Scope`).

A checkpoint is untrusted input, so its own `mtplint.toml` may only describe how the artifact is
deployed (scope "checkpoint"). Settings that widen trust (trust-remote-code), pick what runs
(vllm-python, vllm-commit, serve-args-file: the user's own `vllm serve` command), hide findings
(select, ignore, fail-on, suppress, and with-patches, which probes a patched vLLM so the findings a
patch resolves vanish) or bound the run (probe-timeout, probe-memory) are "project": the command
line or the user's project configuration. The rest are "command": the command line (or the Python
API) only.
"""

# ruff: noqa: RUF009  (`_setting` returns a dataclasses.field: its metadata declares the setting)
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core.findings import SEVERITIES, Severity

Scope = Literal["checkpoint", "project", "command"]
Format = Literal["text", "json", "junit", "sarif", "github"]
OutputFormat = Literal["concise", "full"]
ColorMode = Literal["auto", "always", "never"]

FORMATS: tuple[Format, ...] = ("text", "json", "junit", "sarif", "github")
Check = Callable[[Any], Any]


def int_in(lo: int, hi: int) -> Check:
    def check(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
            return v
        raise ValueError(f"an integer from {lo} to {hi}")

    return check


def text(v: Any) -> Any:
    if isinstance(v, str) and v:
        return v
    raise ValueError("a non-empty string")


def path_text(v: Any) -> Any:
    if isinstance(v, Path) or (isinstance(v, str) and v):
        return str(v)
    raise ValueError("a path")


def optional_path(v: Any) -> Any:
    if isinstance(v, Path) or (isinstance(v, str) and v):
        return Path(v)
    raise ValueError("a path")


def compute_capability(v: Any) -> Any:
    if isinstance(v, (str, float)) and not isinstance(v, bool):
        return str(v)
    raise ValueError('MAJOR.MINOR, e.g. "9.0"')


def codes(v: Any) -> Any:
    """Rule codes or prefixes: "MTP001,MTP01" or ["MTP001", "MTP01"] -> ("MTP001", "MTP01")."""
    if isinstance(v, str):
        items: list[str] = v.split(",")
    elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        items = list(v)
    else:
        raise ValueError("a comma-separated string or a list of strings")
    return tuple(c.strip().upper() for c in items if c.strip())


def patch_ids(v: Any) -> Any:
    if isinstance(v, str):
        return tuple(p.strip() for p in v.split(",") if p.strip())
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise ValueError("a comma-separated string or a list of strings")


def one_of(*allowed: str) -> Check:
    def check(v: Any) -> Any:
        if v in allowed:
            return v
        quoted = [f'"{a}"' for a in allowed]
        raise ValueError(", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0])

    return check


def memory_size(v: Any) -> Any:
    from ..probe.memory_cap import parse_size

    return parse_size(v)  # ValueError says what is accepted


def seconds(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e7:
        return float(v)
    raise ValueError("a positive number of seconds")


def flag(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    raise ValueError("true or false")


def format_list(v: Any) -> Any:
    items = (v,) if isinstance(v, str) else v
    if isinstance(items, (list, tuple)) and all(x in FORMATS for x in items):
        return tuple(items)
    raise ValueError(f"a list of {', '.join(FORMATS)}")


def path_list(v: Any) -> Any:
    items = (v,) if isinstance(v, (str, Path)) else v
    if isinstance(items, (list, tuple)) and all(isinstance(x, (str, Path)) for x in items):
        return tuple(Path(x) for x in items)
    raise ValueError("a list of paths")


def token_list(v: Any) -> Any:
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise ValueError("a list of strings")


def _setting(default: Any, check: Check | None, scope: Scope = "command", key: str | None = None) -> Any:
    """A settings field. `key`: its spelling in a settings file (None: not settable from a file)."""
    return field(default=default, metadata={"check": check, "scope": scope, "key": key, "derived": False})


def _derived(default: Any) -> Any:
    """A field the loader derives from others (a serve command's reading, the files read): it
    decides findings, but no caller gives it."""
    return field(default=default, metadata={"check": None, "scope": "command", "key": None, "derived": True})


@dataclass(frozen=True)
class LintSettings:
    """What decides a lint's findings: the Python API's keywords and the key a remembered verdict
    is stored under (Ruff's LinterSettings). How the findings are shown or acted on is not here
    (OutputSettings), so `-v`, `--format json`, `-q` and `fix --dry-run` of one lint share it."""

    # The deployment linted: a checkpoint's own mtplint.toml may set these.
    num_speculative_tokens: int = _setting(1, int_in(1, 64), "checkpoint", "num-speculative-tokens")
    gpu: str | None = _setting(None, text, "checkpoint", "gpu")
    sm: str | None = _setting(None, compute_capability, "checkpoint", "sm")
    tensor_parallel_size: int = _setting(1, int_in(1, 1024), "checkpoint", "tensor-parallel-size")
    pipeline_parallel_size: int = _setting(1, int_in(1, 64), "checkpoint", "pipeline-parallel-size")
    kv_cache_dtype: str | None = _setting(None, text, "checkpoint", "kv-cache-dtype")
    # What runs, what is reported, what bounds the run: the command line or the project's file.
    select: tuple[str, ...] | None = _setting(None, codes, "project", "select")
    ignore: tuple[str, ...] | None = _setting(None, codes, "project", "ignore")
    fail_on: Severity = _setting("error", one_of(*SEVERITIES), "project", "fail-on")
    patches: tuple[str, ...] = _setting((), patch_ids, "project", "with-patches")
    probe_timeout: float = _setting(600.0, seconds, "project", "probe-timeout")
    probe_memory: int | None = _setting(None, memory_size, "project", "probe-memory")  # None: MTPLINT_PROBE_MEMORY
    vllm_commit: str | None = _setting(None, text, "project", "vllm-commit")
    vllm_python: str | None = _setting(None, path_text, "project", "vllm-python")
    vllm_source: str | None = _setting(None, path_text, "project", "vllm-source")
    trust_remote_code: bool = _setting(False, flag, "project", "trust-remote-code")
    serve_args_file: str | None = _setting(None, path_text, "project", "serve-args-file")
    # [[suppress]] tables (lint/config/suppressions.py), parsed by their own reader.
    suppress: tuple[Any, ...] = _setting((), None, "project", "suppress")
    # The command line (or the Python API) only.
    draft: str | None = _setting(None, path_text)  # a separate draft checkpoint (lint/pipeline/draft.py)
    method: str | None = _setting(None, text)
    reference: str | None = _setting(None, path_text)  # the MTP block's source (lint/pipeline/reference.py)
    # The user's own `vllm serve` command: the tokens after `--` (lint/config/serve_args.py).
    serve_command: tuple[str, ...] | None = _setting(None, token_list)
    no_cache: bool = _setting(False, flag)
    no_elision: bool = _setting(False, flag)
    # Derived by the loader, never given.
    serve_argv: tuple[str, ...] = _derived(())  # the serve command after `vllm serve`, for the probe
    serve_model: str | None = _derived(None)  # its model as read here (the checkpoint linted)
    serve_env: tuple[tuple[str, str], ...] = _derived(())  # `NAME=VALUE` written before it, for the probe
    serve_draft: str | None = _derived(None)  # its speculative model as written, where it names one
    # Deployment options given on the command line beside a serve command: vLLM's reading must agree.
    serve_pinned: tuple[tuple[str, Any], ...] = _derived(())
    settings_files: tuple[dict[str, str], ...] = _derived(())  # {"path", "source"} per file read

    def replace(self, **changes: Any) -> LintSettings:
        return dataclasses.replace(self, **changes)

    def key(self) -> dict[str, Any]:
        """Every field by name: what a remembered verdict is keyed by."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class OutputSettings:
    """How a lint's findings are shown or acted on: the command line's (the API renders on request)."""

    baseline: Path | None = _setting(None, optional_path)  # applied after the lint (policy)
    write_baseline: Path | None = _setting(None, optional_path)
    formats: tuple[Format, ...] = _setting((), format_list)
    outputs: tuple[Path, ...] = _setting((), path_list)
    output_format: OutputFormat | None = _setting(None, one_of("concise", "full"))
    verbose: bool = _setting(False, flag)
    statistics: bool = _setting(False, flag)
    color: ColorMode | None = _setting(None, one_of("auto", "always", "never"))
    repo_root: Path | None = _setting(None, optional_path)
    quiet: bool = _setting(False, flag)
    debug: bool = _setting(False, flag)
    # `mtplint fix`.
    only: str | None = _setting(None, text)
    dry_run: bool = _setting(False, flag)
    drop_dead: bool = _setting(False, flag)
    out: Path | None = _setting(None, optional_path)

    @property
    def full(self) -> bool:
        """The text report with every finding's evidence (--output-format full, -v)."""
        return self.output_format == "full" or self.verbose


LINT_FIELDS = frozenset(f.name for f in dataclasses.fields(LintSettings))
OUTPUT_FIELDS = frozenset(f.name for f in dataclasses.fields(OutputSettings))


@dataclass(frozen=True)
class Settings:
    """One run's settings: the lint's, and how its findings are shown or acted on."""

    lint: LintSettings = field(default_factory=LintSettings)
    output: OutputSettings = field(default_factory=OutputSettings)

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from field names of either part (TypeError on any other name)."""
        unknown = sorted(set(values) - LINT_FIELDS - OUTPUT_FIELDS)
        if unknown:
            raise TypeError(f"not a setting: {', '.join(unknown)}")
        return cls(
            LintSettings(**{k: v for k, v in values.items() if k in LINT_FIELDS}),
            OutputSettings(**{k: v for k, v in values.items() if k in OUTPUT_FIELDS}),
        )

    def replace(self, **changes: Any) -> Settings:
        """These fields changed, in whichever part holds each."""
        lint = {k: v for k, v in changes.items() if k in LINT_FIELDS}
        output = {k: v for k, v in changes.items() if k in OUTPUT_FIELDS}
        if len(lint) + len(output) != len(changes):
            raise TypeError(f"not a setting: {', '.join(sorted(set(changes) - LINT_FIELDS - OUTPUT_FIELDS))}")
        return Settings(
            dataclasses.replace(self.lint, **lint) if lint else self.lint,
            dataclasses.replace(self.output, **output) if output else self.output,
        )


FIELDS = {f.name: f for f in (*dataclasses.fields(LintSettings), *dataclasses.fields(OutputSettings))}
# A settings file's key -> the field it sets.
FILE_KEYS = {f.metadata["key"]: name for name, f in FIELDS.items() if f.metadata["key"]}
CHECKPOINT_KEYS = tuple(f.metadata["key"] for f in FIELDS.values() if f.metadata["scope"] == "checkpoint")
DERIVED = frozenset(name for name, f in FIELDS.items() if f.metadata["derived"])
# What a caller may give (the command line's options, the API's keywords): every field but the derived.
GIVEN = frozenset(FIELDS) - DERIVED


def checked(name: str, value: Any) -> Any:
    """`value` for the field `name`, as its check normalizes it; ValueError says what is accepted."""
    check = FIELDS[name].metadata["check"]
    return value if check is None else check(value)
