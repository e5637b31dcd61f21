"""The user's own `vllm serve` command as lint input (`mtplint check -- vllm serve PATH ...`,
`--serve-args-file FILE`).

The probe child parses the whole command with the probed vLLM's own parser and builds the
engine configuration from it (lint/probe/child/engine_config.py): every engine flag counts,
every spelling vLLM accepts (underscores, dotted keys, abbreviations) is read as vLLM reads
it, and a flag that vLLM rejects is bad input in its own words. The report is labelled with
what vLLM read (TP, PP, N, the method), and the probe cache is keyed by the command as written.
Here, before any probe, only what must be known to stage the probe is read: the model (the
checkpoint linted), the speculative config's `model` (a separate draft, whose headers are
staged) and --trust-remote-code (which files travel with a config); the child refuses to go
on where vLLM reads any of them otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.launch_env import is_secret
from ..core.regular_files import UnreadableFile, read_capped_text
from ..inventory.remote import hub_spec

_SPEC_FLAGS = ("--speculative-config", "--speculative_config", "-sc")
_MODEL_FLAG = re.compile(r"^--model(=.+|$)")  # vLLM's own pattern (utils/argparse_utils.py)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_MAX_FILE_BYTES = 1 << 20
# mtplint's options a serve command also sets: given beside one, vLLM's reading must agree.
PINNABLE = ("tensor_parallel_size", "pipeline_parallel_size", "num_speculative_tokens", "kv_cache_dtype", "method")
# JSON in a flag value (--speculative-config, --hf-overrides, ...) nested deeper than this is bad
# input here: Python's json (mtplint's and vLLM's) fails on ~1,000 levels with a RecursionError.
MAX_FLAG_NESTING = 64
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# `python -m vllm.entrypoints.openai.api_server --model X` (older docs) and the CLI's module.
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_CLI_MODULE = "vllm.entrypoints.cli.main"


def split_env(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """A shell's `[env] NAME=VALUE ... vllm serve ...`: the assignments before the command (as
    recipes write `VLLM_USE_DEEP_GEMM=0 vllm serve ...`), and the command."""
    rest = list(tokens)
    if rest[:1] == ["env"] and len(rest) > 1 and _ENV_WORD.match(rest[1]):
        rest = rest[1:]
    env: dict[str, str] = {}
    while rest and _ENV_WORD.match(rest[0]):
        name, _, value = rest.pop(0).partition("=")
        env[name] = value
    return env, rest


def is_serve_command(tokens: list[str] | tuple[str, ...]) -> bool:
    """Whether TOKENS start a vLLM server as people write it: `vllm serve`, behind environment
    assignments or not, or the OpenAI server module run by Python."""
    rest = split_env(list(tokens))[1]
    return rest[:2] == ["vllm", "serve"] or _launcher_words(rest) > 0


def _launcher_words(tokens: list[str]) -> int:
    """How many leading TOKENS are `python -m vllm.entrypoints...` (0: none)."""
    if len(tokens) >= 3 and re.fullmatch(r"(?:\S*/)?python[\d.]*", tokens[0]) and tokens[1] == "-m":
        if tokens[2] == _API_SERVER_MODULE:
            return 3
        if tokens[2] == _CLI_MODULE and tokens[3:4] == ["serve"]:
            return 4
    return 0


def serve_env(tokens: list[str]) -> dict[str, str]:
    """The environment assignments written before a serve command, less secrets (a token on
    the command line is vLLM's business, never the probe's, and never echoed)."""
    return {k: v for k, v in split_env(tokens)[0].items() if not is_secret(k)}


def split_command(tokens: list[str], where: str) -> tuple[str | None, list[str]]:
    """(model, argv) of `vllm serve ARGV`: ARGV as written (the `vllm serve` words optional,
    environment assignments before them dropped: `serve_env` reads them), and its model as
    vLLM finds it: the first `--model X` (vLLM moves it to the front), else a first token that
    is not a flag."""
    tokens = split_env(tokens)[1]
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    elif tokens[:1] == ["serve"]:
        tokens = tokens[1:]
    elif words := _launcher_words(tokens):
        tokens = tokens[words:]
    for i, token in enumerate(tokens):
        if _MODEL_FLAG.match(token):
            if token == "--model":
                return (tokens[i + 1] if i + 1 < len(tokens) else None), tokens
            return token.removeprefix("--model="), tokens
    if tokens and not tokens[0].startswith("-"):
        return tokens[0], tokens
    return None, tokens


def with_model(argv: list[str], model: str) -> list[str]:
    """ARGV with its model replaced by MODEL (added first where it names none)."""
    for i, token in enumerate(argv):
        if _MODEL_FLAG.match(token):
            if token == "--model":
                return [*argv[: i + 1], model, *argv[i + 2 :]] if i + 1 < len(argv) else [*argv, model]
            return [*argv[:i], f"--model={model}", *argv[i + 1 :]]
    if argv and not argv[0].startswith("-"):
        return [model, *argv[1:]]
    return [model, *argv]


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


def speculative_model(argv: list[str]) -> tuple[str | None, str | None]:
    """(model, revision) of the speculative config, as written: the last JSON value of the
    flag, then its dotted `.model` / `.revision` keys. Read to stage the draft before probing;
    vLLM's parser stays the judge (the child confirms it reads the same model). JSON it cannot
    read is left to vLLM to reject."""
    spec: dict[str, Any] = {}
    for i, token in enumerate(argv):
        flag, eq, inline = token.partition("=")
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        if _is_spec_flag(flag) and value is not None:
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            spec = dict(parsed) if isinstance(parsed, dict) else {}
        for base in _SPEC_FLAGS[:2]:
            if flag.startswith(base + ".") and value is not None:
                spec[flag.removeprefix(base + ".")] = value
    model, revision = spec.get("model"), spec.get("revision")
    return (model if isinstance(model, str) else None), (revision if isinstance(revision, str) else None)


def _is_spec_flag(flag: str) -> bool:
    # vLLM reads `_` as `-` in flag names and takes unambiguous abbreviations (argparse).
    spelled = flag.replace("_", "-")
    return flag == "-sc" or (len(spelled) > len("--spec") and "--speculative-config".startswith(spelled))


def draft_source(written: str, revision: str | None) -> str:
    """Where mtplint reads a draft named in a serve command: a local directory as written, else
    a hub id (ORG/NAME) header-only as hf://ORG/NAME[@REVISION], as vLLM would download it."""
    if written.startswith("hf://") or os.path.exists(written) or not _HUB_ID.match(written):
        return written
    return f"hf://{written}" + (f"@{revision}" if revision else "")


def model_source(written: str, argv: list[str]) -> str:
    """Where mtplint reads the checkpoint a serve command serves: a local directory as written,
    else a hub id (ORG/NAME, with the command's --revision) as hf://ORG/NAME[@REVISION], the
    repository vLLM would download."""
    return draft_source(written, _flag_value(argv, "--revision"))


def _flag_value(argv: list[str], flag: str) -> str | None:
    value = None
    for i, token in enumerate(argv):
        spelled = token.replace("_", "-")
        if spelled == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif spelled.startswith(flag + "="):
            value = token.split("=", 1)[1]
    return value


def folded(values: dict[str, Any], given: dict[str, Any], path: Path) -> dict[str, Any]:
    """The settings a serve command (`serve_command`: tokens after `--`, or `serve_args_file`)
    sets: `serve_argv` (the command after `vllm serve`, its model the checkpoint linted),
    `serve_model`, the draft its speculative config names (`draft`, and `serve_draft` as
    written), --trust-remote-code, and `serve_pinned`: mtplint's own deployment options given
    beside it, which vLLM's reading of the command must agree with (checked after the probe)."""
    tokens, where = _tokens(values)
    if tokens is None:
        return {}
    model, argv = split_command(tokens, where)
    if problem := nesting_problem(argv, where):
        raise BadInput(problem)
    if model is None or (Path(model) != path and hub_spec(model_source(model, argv)) != hub_spec(path)):
        model = str(path)  # a serve-args file's command, linted against PATH
        argv = with_model(argv, model)
    out: dict[str, Any] = {"serve_argv": tuple(argv), "serve_model": model}
    if env := serve_env(tokens):
        out["serve_env"] = tuple(sorted(env.items()))
    if any(t in ("--trust-remote-code", "--trust_remote_code") for t in argv):
        out["trust_remote_code"] = True
    written, revision = speculative_model(argv)
    draft = values.get("draft")
    if written is not None and not _same_checkpoint(written, model):
        source = draft_source(written, revision)
        if draft is not None and draft != source:
            raise BadInput(f"{where}: its speculative model {written!r} is not the --draft {draft}")
        out["draft"], out["serve_draft"] = source, written
    elif written is not None:
        out["serve_draft"] = written  # the target itself, named as the speculative model
    elif draft is not None:
        raise BadInput(
            f"{where}: --draft {draft} is not in it; name the draft as vLLM reads it: "
            '--speculative-config \'{"model": "DRAFT", ...}\''
        )
    out["serve_pinned"] = tuple((k, given[k]) for k in PINNABLE if given.get(k) not in (None, False))
    return out


def _tokens(values: dict[str, Any]) -> tuple[list[str] | None, str]:
    tokens: list[str] | None = None
    where = "vllm serve command"
    if values.get("serve_command"):
        tokens = list(values["serve_command"])
    if values.get("serve_args_file"):
        if tokens is not None:
            raise BadInput("give the vllm serve command after `--` or in --serve-args-file, not both")
        where = str(values["serve_args_file"])
        tokens = read_file(Path(values["serve_args_file"]))
    return tokens, where


def _same_checkpoint(written: str, model: str) -> bool:
    if written == model:
        return True
    try:
        return os.path.isdir(written) and os.path.samefile(written, model)
    except OSError:
        return False
