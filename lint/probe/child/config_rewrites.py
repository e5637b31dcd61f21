"""config.json fields the configuration class vLLM used reads differently from the checkpoint.

A checkpoint whose config.json names its own configuration class (auto_map AutoConfig) is read
with that class only under --trust-remote-code; without it vLLM takes transformers' or its own
built-in class for the model_type, which may derive a field instead of keeping the declared
value (transformers 5.20's BailingHybridConfig sets head_dim = qk_rope_head_dim: 128 -> 64 for
Ling/Ring 2.5), so the model is built at other sizes than the checkpoint's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..report import ConfigRewrite

_SCALAR = (int, float, str, bool)


def read(config_dir: str, trust_remote_code: bool, hf_config: Any) -> dict[str, ConfigRewrite]:
    if trust_remote_code or not config_dir:
        return {}
    try:
        raw = json.loads((Path(config_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    auto_map = raw.get("auto_map")
    auto_config = auto_map.get("AutoConfig") if isinstance(auto_map, dict) else None
    if not isinstance(auto_config, str):
        return {}
    cls = type(hf_config)
    meta = (f"{cls.__module__}.{cls.__name__}", auto_config)
    out = _compare(raw, hf_config, "", meta)
    text = raw.get("text_config")
    get_text = getattr(hf_config, "get_text_config", None)
    if isinstance(text, dict) and callable(get_text):
        out.update(_compare(text, get_text(), "text_config.", meta))
    return out


def _compare(raw: dict[str, Any], obj: Any, prefix: str, meta: tuple[str, str]) -> dict[str, ConfigRewrite]:
    out = {}
    for key, declared in raw.items():
        if not isinstance(declared, _SCALAR) or not hasattr(obj, key):
            continue
        got = getattr(obj, key)
        if _same(declared, got):
            continue
        out[prefix + key] = ConfigRewrite(
            declared=declared, read=_plain(got), config_class=meta[0], auto_config=meta[1]
        )
    return out


def _same(declared: Any, got: Any) -> bool:
    if isinstance(declared, bool) or isinstance(got, bool):
        return declared == got
    if isinstance(declared, (int, float)) and isinstance(got, (int, float)):
        return float(declared) == float(got)
    # torch_dtype / dtype: "bfloat16" is read as torch.bfloat16
    return str(got).removeprefix("torch.") == str(declared)


def _plain(value: Any) -> Any:
    return value if isinstance(value, (*_SCALAR, type(None))) else str(value)
