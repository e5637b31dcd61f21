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


def evaluate(vllm_config: Any, num_speculative_tokens: int) -> Kernels:
    next_n = num_speculative_tokens + 1
    hf = vllm_config.model_config.hf_text_config
    uses_indexer = getattr(hf, "index_topk", None) is not None
    out = Kernels(next_n=next_n, uses_sparse_indexer=uses_indexer, status="not-applicable")
    if not uses_indexer:
        return out
    native_decode = _predicate("vllm.v1.attention.backends.mla.indexer", "_supports_native_decode")
    native_next_n = _predicate("vllm.utils.deep_gemm", "native_next_n_supported")
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
        # No predicate: this vLLM predates the flattened fallback; the kernel limit is
        # not knowable from the code we probed.
        out.status = "unknown"
    elif out.checks and out.checks[0].result:
        out.status = "native"
    else:
        # 0.33.0 flattens unsupported next_n to one row per query: it runs, slower.
        out.status = "fallback"
    return out
