"""Does next_n = num_speculative_tokens + 1 fit the attention/indexer kernels of this vLLM?

Answered by the probed vLLM's own predicates where they exist; where they do not, the
answer is "unknown" rather than a guess.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..report import KernelCheck, Kernels


def _predicate(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:
        return None


def _on_rocm() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_rocm())
    except Exception:
        return False


def evaluate(vllm_config: Any, num_speculative_tokens: int) -> Kernels:
    next_n = num_speculative_tokens + 1
    hf = vllm_config.model_config.hf_text_config
    uses_indexer = getattr(hf, "index_topk", None) is not None
    out = Kernels(next_n=next_n, uses_sparse_indexer=uses_indexer, status="not-applicable")
    if not uses_indexer:
        return out
    native_decode = _predicate("vllm.v1.attention.backends.mla.indexer", "_supports_native_decode")
    # DeepGEMM is CUDA's; its predicate reads only the capability family, and an AMD gfx942's
    # HIP capability (9, 4) is family 90: asked on ROCm it would answer for Hopper. vLLM's own
    # `_supports_native_decode` answers for ROCm (it asks `is_cuda()` first).
    native_next_n = None if _on_rocm() else _predicate("vllm.utils.deep_gemm", "native_next_n_supported")
    for label, fn in (
        ("vllm.v1.attention.backends.mla.indexer._supports_native_decode", native_decode),
        ("vllm.utils.deep_gemm.native_next_n_supported", native_next_n),
    ):
        if fn is None:
            continue
        try:
            out.checks.append(KernelCheck(predicate=label, next_n=next_n, result=bool(fn(next_n))))
        except Exception as exc:
            out.checks.append(KernelCheck(predicate=label, next_n=next_n, error=str(exc)))
    if native_decode is None:
        # No predicate function: releases before 0.29 decide inside the indexer metadata
        # builder's __init__ (`self.use_flattening = ...`); ask that expression. Without
        # either, the kernel limit is not knowable from the code probed.
        flattening = _builder_flattening(vllm_config, num_speculative_tokens)
        if flattening is None:
            out.status = "unknown"
        else:
            out.checks.append(flattening)
            out.status = "native" if flattening.result else "fallback"
    elif out.checks and out.checks[0].result:
        out.status = "native"
    else:
        # 0.33.0 flattens unsupported next_n to one row per query: it runs, slower.
        out.status = "fallback"
    return out


_INDEXER = "vllm.v1.attention.backends.mla.indexer"


def _builder_flattening(vllm_config: Any, num_speculative_tokens: int) -> KernelCheck | None:
    """vLLM's own `self.use_flattening = ...` of the indexer metadata builder (0.19-0.28),
    evaluated for this platform and next_n without building the builder (it wants a device
    and KV cache specs): the expression read from the class's source, its names from the
    module (the platform shim's `current_platform`), `self` the class's attributes plus the
    config's. The check's result is True where decode is native (no flattening). None where
    this vLLM has no such expression or it cannot be evaluated here."""
    import ast
    import inspect
    import textwrap

    try:
        module = importlib.import_module(_INDEXER)
    except Exception:
        return None
    for cls in vars(module).values():
        init = getattr(cls, "__init__", None) if isinstance(cls, type) and cls.__module__ == _INDEXER else None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(init))) if init is not None else None
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree) if tree is not None else ():
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr == "use_flattening"
            ):
                continue
            self_ = _BuilderView(cls, vllm_config, num_speculative_tokens)
            label = f"{_INDEXER}.{cls.__name__}.__init__: self.use_flattening = {ast.unparse(node.value)}"
            next_n = num_speculative_tokens + 1
            try:
                code = compile(ast.Expression(node.value), "<use_flattening>", "eval")
                flattening = bool(eval(code, dict(vars(module)), {"self": self_, "next_n": next_n}))
            except Exception as exc:
                return KernelCheck(predicate=label, next_n=next_n, error=str(exc)[:300])
            return KernelCheck(predicate=label, next_n=next_n, result=not flattening)
    return None


class _BuilderView:
    """What the builder's `self` holds when __init__ reaches `use_flattening`: its class
    attributes (`natively_supported_next_n`), the config, and the attributes __init__ set
    before from the config (`use_fp4_indexer_cache`, `num_speculative_tokens`)."""

    def __init__(self, cls: type, vllm_config: Any, num_speculative_tokens: int) -> None:
        self._cls = cls
        self.vllm_config = vllm_config
        self.num_speculative_tokens = num_speculative_tokens
        attention = getattr(vllm_config, "attention_config", None)
        self.use_fp4_indexer_cache = bool(getattr(attention, "use_fp4_indexer_cache", False))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)
