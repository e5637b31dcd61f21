"""The user's own `vllm serve` command as lint input (`mtplint check -- vllm serve PATH ...`,
`--serve-args-file FILE`).

The probe child parses the whole command with the probed vLLM's own parser and builds the
engine configuration from it (lint/probe/child/engine_config.py): every engine flag counts, and a
flag that vLLM rejects is bad input in its own words. Here, before any probe, only the flags
mtplint has shorthands for are read (TP, PP, the speculative config's method and N, the KV
cache dtype, trust-remote-code): they pick the probe's platform, key its cache and label the
report, and the child refuses to go on where vLLM reads them otherwise.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.regular_files import UnreadableFile, read_capped_text

# Flag spellings (vLLM 0.33.0 `vllm serve --help`) -> settings key.
_INT_FLAGS = {
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
}
_TEXT_FLAGS = {"--kv-cache-dtype": "kv_cache_dtype"}
_SPEC = "--speculative-config"
_SPEC_ALIASES = (_SPEC, "-sc")
_MAX_FILE_BYTES = 1 << 20
# JSON in a flag value (--speculative-config, --hf-overrides, ...) nested deeper than this is bad
# input here: Python's json (mtplint's and vLLM's) fails on ~1,000 levels with a RecursionError.
MAX_FLAG_NESTING = 64


def split_command(tokens: list[str], where: str) -> tuple[str | None, list[str]]:
    """(model, flags) of `vllm serve MODEL FLAGS...` (the `vllm serve` words optional; no
    model when the first token is a flag)."""
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    elif tokens[:1] == ["serve"]:
        tokens = tokens[1:]
    if not tokens:
        return None, []
    if tokens[0].startswith("-"):
        return None, tokens
    return tokens[0], tokens[1:]


def read_file(path: Path) -> list[str]:
    """The tokens of a serve-args file: one `vllm serve` command line or just its flags, as a
    shell reads them (quotes, backslash line continuations, `#` comments). A file that holds
    none is bad input: linting the default deployment instead would answer another question."""
    try:
        text = read_capped_text(path, _MAX_FILE_BYTES)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such serve-args file") from None
    except UnreadableFile as exc:
        raise BadInput(f"{path}: {exc.strerror}; a serve-args file holds one vllm serve command line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the serve-args file ({exc})") from None
    try:
        tokens = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise BadInput(f"{path}: not a shell command line ({exc})") from None
    if not tokens:
        raise BadInput(f"{path}: holds no vllm serve command (the file is empty or all comments)")
    return tokens


def nesting_problem(tokens: list[str], where: str) -> str | None:
    """The one-line problem of a JSON value (a token, or the part after `--flag=`, that opens with
    a bracket; not a Jinja template) whose brackets nest deeper than MAX_FLAG_NESTING, counted
    outside JSON strings, naming its flag; None when every value is shallower."""
    for i, token in enumerate(tokens):
        value = token.partition("=")[2] if token.startswith("-") else token
        if not value.lstrip().startswith(("{", "[")) or value.lstrip().startswith(("{{", "{%", "{#")):
            continue
        if value.count("{") + value.count("[") <= MAX_FLAG_NESTING or _depth(value) <= MAX_FLAG_NESTING:
            continue
        flag = token.partition("=")[0] if token.startswith("-") else (tokens[i - 1] if i else "a value")
        return f"{where}: {flag[:80]} is nested more than {MAX_FLAG_NESTING} levels deep"
    return None


def _depth(text: str) -> int:
    deepest = depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
    return deepest


def _takes_value(flag: str) -> bool:
    return flag in _INT_FLAGS or flag in _TEXT_FLAGS or flag in _SPEC_ALIASES or flag.startswith(_SPEC + ".")


def _pairs(flags: list[str], where: str) -> list[tuple[str, str | None]]:
    """(flag, value) for each flag of the serve command (`--flag value` or `--flag=value`);
    a value only for the flags read here."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(flags):
        flag, eq, inline = flags[i].partition("=")
        if not _takes_value(flag):
            out.append((flag, None))
            i += 1
            continue
        if not eq and i + 1 >= len(flags):
            raise BadInput(f"{where}: {flag} needs a value")
        out.append((flag, inline if eq else flags[i + 1]))
        i += 1 if eq else 2
    return out


def _spec_json(flag: str, value: str, where: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise BadInput(f"{where}: {flag} is not JSON: {value!r:.80}") from None
    if not isinstance(parsed, dict):
        raise BadInput(f"{where}: {flag} is not a JSON object: {value!r:.80}")
    return dict(parsed)


def _integer(flag: str, value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{where}: {flag} {value!r} is not an integer") from None


def shorthands(flags: list[str], where: str) -> dict[str, Any]:
    """The settings the flags set that mtplint has shorthands for (the last value given wins,
    as with argparse)."""
    out: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    for flag, value in _pairs(flags, where):
        if value is None:
            if flag == "--trust-remote-code":
                out["trust_remote_code"] = True
        elif flag in _INT_FLAGS:
            out[_INT_FLAGS[flag]] = _integer(flag, value, where)
        elif flag in _TEXT_FLAGS:
            out[_TEXT_FLAGS[flag]] = value
        elif flag in _SPEC_ALIASES:
            spec = _spec_json(flag, value, where)
        else:
            spec[flag.removeprefix(_SPEC + ".")] = value
    if spec:
        if spec.get("num_speculative_tokens") is not None:
            out["num_speculative_tokens"] = _integer("num_speculative_tokens", spec["num_speculative_tokens"], where)
        if spec.get("model") is not None:
            raise BadInput(
                f"{where}: the speculative config names a draft model; lint a separate draft with "
                "`mtplint TARGET --draft DRAFT` (its own checkpoint is read header-only)"
            )
        out["speculative_method"] = spec.get("method")
    return out


def folded(values: dict[str, Any], given: dict[str, Any], path: Path) -> dict[str, Any]:
    """The settings a serve command (`serve_command`: tokens after `--`, or `serve_args_file`)
    sets: its shorthand values, and `serve_argv` = (model, *flags) for the probe. A shorthand
    option given on the command line with another value is bad input."""
    tokens: list[str] | None = None
    where = "vllm serve command"
    if values.get("serve_command"):
        tokens = list(values["serve_command"])
    if values.get("serve_args_file"):
        if tokens is not None:
            raise BadInput("give the vllm serve command after `--` or in --serve-args-file, not both")
        where = str(values["serve_args_file"])
        tokens = read_file(Path(values["serve_args_file"]))
    if tokens is None:
        return {}
    _model, flags = split_command(tokens, where)
    if problem := nesting_problem(flags, where):
        raise BadInput(problem)
    found = shorthands(flags, where)
    method = found.pop("speculative_method", None)
    if method is not None and values.get("draft") is None and method != "mtp" and not str(method).endswith("_mtp"):
        raise BadInput(
            f"{where}: speculative method {method!r} drafts from a separate checkpoint; lint it with "
            "`mtplint TARGET --draft DRAFT --method METHOD`"
        )
    for key, value in found.items():
        was = given.get(key)
        if was not in (None, False) and was != value:
            option = "--" + key.replace("_", "-")
            raise BadInput(f"{where}: {option} {value} differs from the command line's {option} {was}")
    return {**found, "serve_argv": (str(path), *flags)}
