"""Start-up steps of `vllm serve` the probe replays only as far as its environment allows.

A step that needs something the probe cannot have (a tokenizer the checkpoint does not
ship, a GPU-only package its interpreter lacks) is left out of the replay and recorded here,
so the lint says which step was not checked instead of reporting the environment's failure
as the checkpoint's. Everything else about the command is replayed as vLLM does.
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import Any

from ..report import UncheckedStep

_TOKENIZER_MARKERS = ("tokenizer.json", "tokenizer.model", "vocab.json", "tekken.json", "vocab.txt")

_steps: list[UncheckedStep] = []


def drain() -> list[UncheckedStep]:
    """The steps recorded since the last drain (one probe's)."""
    out = list(_steps)
    _steps.clear()
    return out


def _record(step: str, flag: str, why: str, package: str = "") -> None:
    _steps.append(UncheckedStep(step=step, flag=flag, why=why, package=package))


def record(step: str, flag: str, why: str, package: str = "") -> None:
    """A step another part of the probe left out (the platform shim: a ROCm-only package), once
    per probe however often vLLM reaches it (the target's and the draft's configs)."""
    if not any(s.step == step and s.flag == flag for s in _steps):
        _record(step, flag, why, package)


def ships_tokenizer(model_dir: str) -> bool:
    return any(os.path.isfile(os.path.join(model_dir, name)) for name in _TOKENIZER_MARKERS) or any(
        name.endswith(".tiktoken") for name in _listdir(model_dir)
    )


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def replay_tokenizer(ea: Any, model_dir: str) -> None:
    """vLLM builds the reasoning parser with the model's tokenizer while it creates the engine
    config (ReasoningConfig.initialize_token_ids): the tokenizer the checkpoint ships is read
    from the staged directory, as vLLM reads it from the model directory. Without one the
    parser is left out and the step is recorded. A `--skip-tokenizer-init` of the user's own
    is kept: vLLM then fails the same way on the GPU box."""
    parser = getattr(ea, "reasoning_parser", "") or ""
    if not parser or getattr(ea, "skip_tokenizer_init", False):
        return
    user_tokenizer = getattr(ea, "tokenizer", None)
    if user_tokenizer:
        _drop_reasoning_parser(ea)
        record(
            f"the reasoning parser '{parser}' built over the tokenizer (its start and end token ids)",
            "--reasoning-parser",
            f"the tokenizer is read from --tokenizer {user_tokenizer}, which the probe does not read",
        )
        return
    if ships_tokenizer(model_dir):
        ea.tokenizer = model_dir
        ea.skip_tokenizer_init = False
        return
    _drop_reasoning_parser(ea)
    record(
        f"the reasoning parser '{parser}' built over the tokenizer (its start and end token ids)",
        "--reasoning-parser",
        "the checkpoint as read here ships no tokenizer files (tokenizer.json, tokenizer.model, ...)",
    )


def _drop_reasoning_parser(ea: Any) -> None:
    ea.reasoning_parser = ""
    if getattr(ea, "reasoning_config", None) is not None:
        ea.reasoning_config.reasoning_parser = ""


def without_tokenizer(ea: Any, exc: BaseException) -> bool:
    """After create_engine_config failed: where the failure is the tokenizer's (a package the
    probe's interpreter lacks), leave the tokenizer and the parser out and say so; True
    when the caller should create the config again."""
    if getattr(ea, "skip_tokenizer_init", True) or not getattr(ea, "reasoning_parser", ""):
        return False
    package = absent_package(exc)
    if package is None:
        return False
    parser = ea.reasoning_parser
    _drop_reasoning_parser(ea)
    ea.tokenizer = None
    ea.skip_tokenizer_init = True
    record(
        f"the reasoning parser '{parser}' built over the tokenizer (its start and end token ids)",
        "--reasoning-parser",
        f"loading the checkpoint's tokenizer needs {package}, which the probe's environment lacks",
        package,
    )
    return True


def replay_attention_backend(ea: Any) -> None:
    """An attention backend named in the command whose module cannot be imported here for a
    package this interpreter lacks (FlashInfer and the other GPU-only kernels vLLM pins): vLLM
    would reject it with `No module named ...` before it validates anything about the model.
    The backend is left to vLLM's own choice and the step recorded; a backend that imports is
    validated by vLLM as on the GPU box."""
    backend = getattr(ea, "attention_backend", None)
    config: Any = getattr(ea, "attention_config", None)
    via_config = backend is None and getattr(config, "backend", None) is not None
    if via_config:
        backend = config.backend
    if backend is None:
        return
    if isinstance(backend, str):  # as typed: vLLM's own validator makes it its enum
        from vllm.config import AttentionConfig

        try:
            backend = AttentionConfig.validate_backend_before(backend)
        except Exception:
            return  # vLLM rejects the name itself when it creates the config
    try:
        getattr(backend, "get_class", lambda: None)()
    except ImportError as exc:
        package = absent_package(exc)
        if package is None:
            return
        if via_config:
            config.backend = None
        else:
            ea.attention_backend = None
        name = getattr(backend, "name", str(backend))
        record(
            f"the attention backend {name} (its import and its checks of this model, dtype and GPU)",
            "--attention-backend",
            f"the probe's environment lacks {package}, a GPU-only package its kernels import",
            package,
        )


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
# transformers' check of remote code's imports (dynamic_module_utils.check_imports).
_NOT_FOUND = re.compile(r"packages that were not found in your environment: ([\w.\-]+(?:, [\w.\-]+)*)")


def absent_package(exc: BaseException | str) -> str | None:
    """The top-level package an import error (or its message, or any exception it was raised
    from) names, where this interpreter has no such package: the environment's failure."""
    seen: set[int] = set()
    current: BaseException | str | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = []
        if isinstance(current, ImportError) and current.name:
            names.append(current.name)
        names += _NO_MODULE.findall(str(current))
        for found in _NOT_FOUND.findall(str(current)):
            names += found.split(", ")
        for name in names:
            top = name.split(".")[0]
            if top and not _importable(top):
                return top
        if isinstance(current, str):
            break
        current = current.__cause__ or current.__context__
    return None


def _importable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
