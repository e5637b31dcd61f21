"""Patch `dsv4-mtp-eproj-prefix`: give DeepSeek-V4's MTP `e_proj` / `h_proj` their layer
prefix, as vLLM 0.24.0 does (PR #44837).

vLLM 0.20-0.23 construct both ReplicatedLinear layers without `prefix=`, so the quant config
matches an empty layer name: compressed-tensors in 0.20 raises `Unable to find matching
target for  in the compressed-tensors config` (vLLM #44817), and in 0.21-0.23 the layers can
never be matched by name (an `ignore` or a target naming them is dead).

The constructor is wrapped, not copied: while it runs, the `ReplicatedLinear` its module
resolves gets `prefix=f"{layer_prefix}.{attribute}"` when none is passed, the attribute being
the one the call's result is assigned to (`self.e_proj = ReplicatedLinear(`).
"""

from __future__ import annotations

import functools
import inspect
import linecache
import re
import sys
from typing import Any

from .constructors import wrap_constructors

# The MTP layer moved between releases; every platform variant has the same constructor.
CLASSES = (
    ("vllm.model_executor.models.deepseek_v4_mtp", "DeepSeekV4MultiTokenPredictorLayer"),  # 0.20-0.21
    ("vllm.models.deepseek_v4.nvidia.mtp", "DeepSeekV4MultiTokenPredictorLayer"),  # 0.22-0.23
    ("vllm.models.deepseek_v4.amd.mtp", "DeepSeekV4MultiTokenPredictorLayer"),
    ("vllm.models.deepseek_v4.xpu.mtp", "DeepSeekV4MultiTokenPredictorLayer"),
)
_ASSIGNED = re.compile(r"self\.(\w+)\s*=\s*ReplicatedLinear\(")


def _assigned_attribute(frame: Any) -> str | None:
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = _ASSIGNED.search(line)
    return m.group(1) if m else None


def _wrap(cls: Any) -> None:
    original = cls.__init__
    signature = inspect.signature(original)
    module: Any = sys.modules[cls.__module__]  # its ReplicatedLinear is swapped while __init__ runs

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        layer_prefix = signature.bind(self, *args, **kwargs).arguments.get("prefix") or ""
        linear = module.ReplicatedLinear

        def replicated_linear(*a: Any, **kw: Any) -> Any:
            if not kw.get("prefix"):
                attribute = _assigned_attribute(sys._getframe(1))
                if attribute:
                    kw["prefix"] = f"{layer_prefix}.{attribute}" if layer_prefix else attribute
            return linear(*a, **kw)

        module.ReplicatedLinear = replicated_linear
        try:
            original(self, *args, **kwargs)
        finally:
            module.ReplicatedLinear = linear

    cls.__init__ = __init__


def apply() -> dict[str, Any]:
    classes = wrap_constructors(
        CLASSES,
        "_mtplint_eproj_prefix",
        _wrap,
        usable=lambda cls: hasattr(sys.modules[cls.__module__], "ReplicatedLinear"),
    )
    return {"status": "applied", "classes": classes}
