"""vLLM names that moved between releases, looked up where each release keeps them (probe child only)."""

from __future__ import annotations

from typing import Any


def set_default_torch_dtype(dtype: Any) -> Any:
    """The context manager that makes DTYPE torch's default while a model is built: in
    `vllm.utils.torch_utils` since 0.11.1, in `vllm.model_executor.model_loader.utils` before."""
    import importlib

    try:
        module = importlib.import_module("vllm.utils.torch_utils")
    except ImportError:
        module = importlib.import_module("vllm.model_executor.model_loader.utils")
    return module.set_default_torch_dtype(dtype)


def mtp_method() -> str | None:
    """The speculative `method` an MTP deployment names on this release: "mtp" where
    SpeculativeConfig accepts it, else None, which is `--speculative-config
    '{"num_speculative_tokens": N}'`: vLLM 0.10-0.11 accept only the family names
    (deepseek_mtp, qwen3_next_mtp, ...) and pick the family's method themselves."""
    import sys
    import typing

    from vllm.config import SpeculativeConfig

    literal = getattr(sys.modules[SpeculativeConfig.__module__], "SpeculativeMethod", None)
    if literal is None or "mtp" in typing.get_args(literal):
        return "mtp"
    return None
