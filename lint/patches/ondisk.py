"""What the checkpoint vLLM is loading stores on disk, for patches that depend on it.

In a vLLM process the checkpoint is `model_config.model` (a local directory). Inside the
mtplint probe that directory holds only config files; the probe names its tensor list in
MTPLINT_PROBE_TENSORS instead.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core import mtp_layout
from ..inventory.fingerprint import fingerprint_modules
from ..inventory.model import TensorInfo


@lru_cache(maxsize=4)
def tensors_of(model_dir: str) -> tuple[TensorInfo, ...]:
    listed = os.environ.get("MTPLINT_PROBE_TENSORS")
    if listed:
        with open(listed) as f:
            return tuple(TensorInfo(n, d, tuple(s), "", 0, 0) for n, d, s in json.load(f))
    if not Path(model_dir).is_dir():
        raise RuntimeError(f"mtplint patches need a local checkpoint directory, got {model_dir!r}")
    from ..inventory.checkpoint import load_inventory

    return tuple(load_inventory(model_dir).tensors.values())


def mtp_key_pattern(hf_config: Any) -> re.Pattern[str]:
    """On-disk names of the MTP block of the checkpoint vLLM is loading (mtplint.core.mtp_layout
    owns the naming), used only to decide what a patch does."""
    config = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(vars(hf_config))
    depth = mtp_layout.declared_depth(config) or _int(mtp_layout.text_config(config).get("n_predict")) or 1
    return mtp_layout.mtp_name_pattern(config, depth)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def mtp_modules(model_dir: str, hf_config: Any) -> dict[str, Any]:
    pattern = mtp_key_pattern(hf_config)
    mtp = [t for t in tensors_of(model_dir) if pattern.match(t.name)]
    return fingerprint_modules(mtp)


def mtp_block_unquantized(model_dir: str, hf_config: Any) -> bool:
    """True when the checkpoint ships MTP tensors and none of their 2-D+ linear weights is
    quantized (no packed dtype, no scale sibling)."""
    modules = mtp_modules(model_dir, hf_config)
    linear = [m for m in modules.values() if m.kind != "unknown"]
    return bool(linear) and not any(m.quantized for m in linear)


def module_quantized(model_dir: str, hf_config: Any, suffix: str) -> bool:
    return any(m.quantized for name, m in mtp_modules(model_dir, hf_config).items() if name.endswith(suffix))
