"""Settings from the command line, the user's project configuration (`mtplint.toml` in the
working directory, else `[tool.mtplint]` in its pyproject.toml) and the checkpoint's own
`mtplint.toml`, in that order of precedence.

A checkpoint is untrusted input, so its file may only describe how the artifact is deployed
(CHECKPOINT_KEYS). Keys that widen trust (trust-remote-code), pick what runs (vllm-python,
vllm-commit, serve-args-file: the user's own `vllm serve` command), hide findings (select,
ignore, fail-on, suppress, and with-patches, which probes a patched vLLM so the findings a
patch resolves vanish) or bound the run (probe-timeout, probe-memory) come only
from the command line or the project configuration; a checkpoint naming one is bad input.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

DEFAULTS: dict[str, Any] = {
    "num_speculative_tokens": 1,
    "gpu": None,
    "sm": None,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "kv_cache_dtype": None,
    "formats": (),
    "outputs": (),
    "select": None,
    "ignore": None,
    "fail_on": "error",
    "with_patches": None,
    "probe_timeout": 600.0,
    "probe_memory": None,  # None: MTPLINT_PROBE_MEMORY, else 8 GiB (probe/memory_cap.py)
    "no_cache": False,
    "quiet": False,
    "debug": False,
    "vllm_commit": None,
    "vllm_python": None,
    "vllm_source": None,
    "suppress": (),
    "draft": None,  # command line only: a separate draft checkpoint (lint/pipeline/draft.py)
    "method": None,
    "reference": None,  # command line only: the source checkpoint of the MTP block (lint/pipeline/reference.py)
    # The user's own `vllm serve` command (lint/config/serve_args.py): the tokens after `--` on the
    # command line, or a file holding it; serve_argv is what the probe parses with vLLM's parser.
    "serve_command": None,
    "serve_args_file": None,
    "serve_argv": [],
}
FILE_KEYS = {
    "num-speculative-tokens": "num_speculative_tokens",
    "gpu": "gpu",
    "sm": "sm",
    "tensor-parallel-size": "tensor_parallel_size",
    "pipeline-parallel-size": "pipeline_parallel_size",
    "kv-cache-dtype": "kv_cache_dtype",
    "select": "select",
    "ignore": "ignore",
    "fail-on": "fail_on",
    "with-patches": "with_patches",
    "probe-timeout": "probe_timeout",
    "probe-memory": "probe_memory",
    "vllm-commit": "vllm_commit",
    "vllm-python": "vllm_python",
    "vllm-source": "vllm_source",
    "trust-remote-code": "trust_remote_code",
    "serve-args-file": "serve_args_file",
    # [[suppress]] tables (mtplint.config.suppressions): hide findings, so project-only like ignore.
    "suppress": "suppress",
}
CHECKPOINT_KEYS = (
    "num-speculative-tokens",
    "gpu",
    "sm",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "kv-cache-dtype",
)
# gpu and sm name one thing (resolve() refuses both): a layer that sets either overrides both below it.
_GPU_GROUP = ("gpu", "sm")
_MAX_FILE_BYTES = 1 << 20
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class SettingsFile:
    label: str  # as printed: the path, plus the table for pyproject.toml
    owner: str  # "project" or "checkpoint"
    values: dict[str, Any]  # settings names (DEFAULTS' keys), validated


def _shown(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else repr(key)


def _int_in(lo: int, hi: int) -> Any:
    def check(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
            return v
        raise ValueError(f"an integer from {lo} to {hi}")

    return check


def _text(v: Any) -> Any:
    if isinstance(v, str) and v:
        return v
    raise ValueError("a non-empty string")


def _sm(v: Any) -> Any:
    if isinstance(v, (str, float)) and not isinstance(v, bool):
        return str(v)
    raise ValueError('MAJOR.MINOR, e.g. "9.0"')


def _codes_value(v: Any) -> Any:
    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        return v
    raise ValueError("a comma-separated string or a list of strings")


def _fail_on(v: Any) -> Any:
    if v in ("error", "warning", "info"):
        return v
    raise ValueError('"error", "warning" or "info"')


def _memory_size(v: Any) -> Any:
    from ..probe.memory_cap import parse_size

    return parse_size(v)  # ValueError says what is accepted


def _seconds(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e7:
        return float(v)
    raise ValueError("a positive number of seconds")


def _flag(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    raise ValueError("true or false")


_VALIDATORS = {
    "num-speculative-tokens": _int_in(1, 64),
    "gpu": _text,
    "sm": _sm,
    "tensor-parallel-size": _int_in(1, 1024),
    "pipeline-parallel-size": _int_in(1, 64),
    "kv-cache-dtype": _text,
    "select": _codes_value,
    "ignore": _codes_value,
    "fail-on": _fail_on,
    "with-patches": _codes_value,
    "probe-timeout": _seconds,
    "probe-memory": _memory_size,
    "vllm-commit": _text,
    "vllm-python": _text,
    "vllm-source": _text,
    "trust-remote-code": _flag,
    "serve-args-file": _text,
}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    if len(raw) > _MAX_FILE_BYTES:
        raise BadInput(f"larger than {_MAX_FILE_BYTES} bytes; not a settings file", path=str(path))
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise BadInput(f"invalid TOML: {reason}", path=str(path)) from None


def _validated(data: Any, where: str, owner: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadInput("[tool.mtplint] must be a table", path=where)
    unknown = sorted(k for k in data if k not in FILE_KEYS)
    if unknown:
        raise BadInput(
            f"unknown option(s) {', '.join(map(_shown, unknown))}; known: {', '.join(FILE_KEYS)}", path=where
        )
    if owner == "checkpoint":
        refused = [k for k in data if k not in CHECKPOINT_KEYS]
        if refused:
            raise BadInput(
                f"{', '.join(refused)} cannot be set by the checkpoint's own settings file (it may set only "
                f"{', '.join(CHECKPOINT_KEYS)}); pass it on the command line or set it in your project's "
                "mtplint.toml or [tool.mtplint] in pyproject.toml",
                path=where,
            )
    values = {}
    for key, value in data.items():
        if key == "suppress":  # its entries' errors name the entry, not the whole value
            from .suppressions import parse_suppressions

            values["suppress"] = parse_suppressions(value, where)
            continue
        try:
            values[FILE_KEYS[key]] = _VALIDATORS[key](value)
        except ValueError as why:
            raise BadInput(f"{key} must be {why}, not {value!r:.80}", path=where) from None
    return values


def _inside(candidate: Path, root: Path) -> bool:
    try:
        return candidate.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return True  # cannot tell: trust it no more than the checkpoint


def settings_files(path: Path) -> list[SettingsFile]:
    """The project's settings file (if any), then the checkpoint's. A project file that lies
    inside the checkpoint (mtplint run from within it) is the checkpoint's, and as untrusted."""
    found: list[SettingsFile] = []
    own = path / "mtplint.toml"
    for candidate, table in ((Path("mtplint.toml"), None), (Path("pyproject.toml"), ("tool", "mtplint"))):
        if not candidate.is_file():
            continue
        data = _read_toml(candidate)
        if table:
            outer = data.get(table[0], {})
            inner = outer.get(table[1]) if isinstance(outer, dict) else None
            if inner is None:
                continue
            data = inner
        label = f"./{candidate}" + (" [tool.mtplint]" if table else "")
        if not _inside(candidate, path):
            found.append(SettingsFile(label, "project", _validated(data, label, "project")))
        elif not (own.is_file() and own.resolve() == candidate.resolve()):
            found.append(SettingsFile(label, "checkpoint", _validated(data, label, "checkpoint")))
        break
    if own.is_file():
        if not _inside(own, path):  # a link out of the checkpoint: never read, never echoed
            raise BadInput("a symbolic link to a file outside the checkpoint; not read", path=str(own))
        found.append(SettingsFile(str(own), "checkpoint", _validated(_read_toml(own), str(own), "checkpoint")))
    return found


def _codes(value: Any) -> list[str] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else str(value).split(",")
    return [c.strip().upper() for c in items if c.strip()]


def load_settings(path: Path, cli: dict[str, Any]) -> dict[str, Any]:
    files = settings_files(path)
    # `is` for False: 0 == False, and `--probe-timeout 0` is a value given, not an option left out.
    given = {k: v for k, v in cli.items() if v is not None and v is not False and v != ()}
    if "ignore_codes" in given:
        given["ignore"] = given.pop("ignore_codes")
    s = dict(DEFAULTS)
    # Lowest precedence first: the checkpoint's file, then the project's, then the command line.
    for layer in [f.values for f in reversed(files)] + [given]:
        if any(k in layer for k in _GPU_GROUP):
            for k in _GPU_GROUP:
                s[k] = None
        s.update(layer)
    s["select"], s["ignore"] = _codes(s.get("select")), _codes(s.get("ignore"))
    s["patches"] = (
        [p.strip() for p in (s.get("with_patches") or "").split(",") if p.strip()]
        if not isinstance(s.get("with_patches"), list)
        else s["with_patches"]
    )
    s["settings_files"] = [{"path": f.label, "source": f.owner} for f in files]
    from . import serve_args

    serve_args.apply(s, given, path)
    return s


def sources_line(s: dict[str, Any]) -> str | None:
    """One line naming the settings files a run used, or None when it used none."""
    files = s.get("settings_files") or []
    if not files:
        return None
    shown = [f["path"] + (" (checkpoint: deploy inputs only)" if f["source"] == "checkpoint" else "") for f in files]
    return f"mtplint: settings from {', '.join(shown)}"


def load_and_announce(path: Path, cli: dict[str, Any]) -> dict[str, Any]:
    """load_settings, then name the settings files used on stderr (not with -q)."""
    import click

    s = load_settings(path, cli)
    line = sources_line(s)
    if line and not s.get("quiet"):
        click.echo(line, err=True)
    return s
