"""Settings from the command line (or the Python API), the user's project configuration
(`mtplint.toml` in the working directory, else `[tool.mtplint]` in its pyproject.toml) and the
checkpoint's own `mtplint.toml`, in that order of precedence, merged into one `Settings`
(lint/config/schema.py declares each setting, its file key, its check and who may set it; a
checkpoint naming a setting outside its scope is bad input).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.regular_files import UnreadableFile, read_capped
from .schema import CHECKPOINT_KEYS, FILE_KEYS, GIVEN, LintSettings, Settings, checked

# gpu and sm name one thing (resolve() refuses both): a layer that sets either overrides both below it.
_GPU_GROUP = ("gpu", "sm")
_MAX_FILE_BYTES = 1 << 20
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class SettingsFile:
    label: str  # as printed: the path, plus the table for pyproject.toml
    owner: str  # "project" or "checkpoint"
    values: dict[str, Any]  # Settings field names, validated


def _shown(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else repr(key)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = read_capped(path, _MAX_FILE_BYTES)
    except UnreadableFile as exc:
        raise BadInput(f"{exc.strerror}; not a settings file", path=str(path)) from None
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
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
            values[FILE_KEYS[key]] = checked(FILE_KEYS[key], value)
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


# What a command line parsed (click's values by parameter name) or the API's keywords: turned into
# Settings by load_settings, and read before that only for what decides how errors are shown.
Options = Mapping[str, Any]
# Option names the command line spells differently from the field they set.
ALIASES = {"ignore_codes": "ignore", "with_patches": "patches"}


def given_values(options: Options) -> dict[str, Any]:
    """The options a caller actually gave, by field name. `is` for False: 0 == False, and
    `--probe-timeout 0` is a value given, not an option left out."""
    given = {ALIASES.get(k, k): v for k, v in options.items() if v is not None and v is not False and v != ()}
    unknown = sorted(set(given) - GIVEN)
    if unknown:
        raise TypeError(f"not a setting: {', '.join(unknown)}")
    return given


def load_settings(path: Path, options: Options) -> Settings:
    """Settings for the checkpoint at `path`: the command line's `options` (field names, or
    the CLI's spellings in ALIASES) over the project's file over the checkpoint's."""
    files = settings_files(path)
    given = given_values(options)
    for name in ("select", "ignore", "patches"):  # comma-separated on the command line
        if name in given:
            given[name] = checked(name, given[name])
    values: dict[str, Any] = {}
    # Lowest precedence first: the checkpoint's file, then the project's, then the command line.
    for layer in [f.values for f in reversed(files)] + [given]:
        if any(k in layer for k in _GPU_GROUP):
            for k in _GPU_GROUP:
                values.pop(k, None)
        values.update(layer)
    values["settings_files"] = tuple({"path": f.label, "source": f.owner} for f in files)
    from . import serve_args

    values.update(serve_args.folded(values, given, path))
    return Settings.of(**values)


def sources_line(s: LintSettings) -> str | None:
    """One line naming the settings files a run used, or None when it used none."""
    files = s.settings_files
    if not files:
        return None
    shown = [f["path"] + (" (checkpoint: deploy inputs only)" if f["source"] == "checkpoint" else "") for f in files]
    return f"mtplint: settings from {', '.join(shown)}"


def load_and_announce(path: Path, cli: Options) -> Settings:
    """load_settings, then name the settings files used on stderr (not with -q)."""
    import click

    s = load_settings(path, cli)
    line = sources_line(s.lint)
    if line and not s.output.quiet:
        click.echo(line, err=True)
    return s
