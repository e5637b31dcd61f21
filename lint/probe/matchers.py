"""Which runtime construction prefixes does each exclusion entry actually exclude?

Answered by vLLM's own quant config: for every layer recorded at construction, the
config's get_quant_method() is asked again with its exclusion list narrowed to one entry.
That is the format's real matcher (compressed-tensors `re:` with re.match, ModelOpt
substring + fnmatch, fp8 exact, GPTQ `-:` dynamic...), packed-module mapping included.
"""

from __future__ import annotations

import contextlib
from typing import Any

# The attribute each quant config keeps its exclusion list in.
EXCLUSION_ATTRS = ("ignore", "exclude_modules", "ignored_layers", "modules_to_not_convert", "dynamic")


def exclusion_attr(quant_config: Any) -> str | None:
    for attr in EXCLUSION_ATTRS:
        value = getattr(quant_config, attr, None)
        if isinstance(value, (list, dict)):
            return attr
    return None


def _is_unquantized(method: Any) -> bool:
    return method is None or type(method).__name__.startswith("Unquantized")


@contextlib.contextmanager
def _narrowed(quant_config: Any, attr: str, value: Any):
    saved = getattr(quant_config, attr)
    setattr(quant_config, attr, value)
    try:
        yield
    finally:
        setattr(quant_config, attr, saved)


def _excluded(quant_config: Any, get_quant_method: Any, layer: Any, prefix: str) -> bool | None:
    saved_scheme = getattr(layer, "scheme", None)
    try:
        return _is_unquantized(get_quant_method(layer, prefix))
    except Exception:
        return None  # the config cannot decide for this layer with this list (reported elsewhere)
    finally:
        if saved_scheme is not None:
            with contextlib.suppress(Exception):
                layer.scheme = saved_scheme


def direct_matcher(quant_config: Any, attr: str) -> Any:
    """The format's own name matcher, called with one entry: (entry, prefix) -> bool.

    Preferred over re-asking get_quant_method because it also answers for layers that
    would be unquantized anyway (an `lm_head` entry does match the `lm_head` prefix).
    """
    import importlib

    def fn(module: str, name: str) -> Any:
        try:
            return getattr(importlib.import_module(module), name, None)
        except Exception:
            return None

    fused = getattr(quant_config, "packed_modules_mapping", {}) or {}
    qname = type(quant_config).__name__
    if attr == "ignore" and qname.startswith("CompressedTensors"):
        should_ignore = fn("vllm.model_executor.layers.quantization.compressed_tensors.utils",
                           "should_ignore_layer")
        if should_ignore is not None:
            return lambda entry, prefix: should_ignore(prefix, ignore=[entry], fused_mapping=fused)
    if attr == "exclude_modules" and hasattr(quant_config, "is_layer_excluded"):
        def modelopt(entry: str, prefix: str) -> bool:
            with _narrowed(quant_config, attr, [entry]):
                return bool(quant_config.is_layer_excluded(prefix))
        return modelopt
    if attr in ("ignored_layers", "modules_to_not_convert"):
        skipped = fn("vllm.model_executor.layers.quantization.utils.quant_utils", "is_layer_skipped")
        mode = getattr(quant_config, "ignored_layers_match_mode", None)
        if skipped is not None and "awq" not in qname.lower():
            if mode:
                return lambda entry, prefix: skipped(prefix, [entry], fused, match_mode=mode)
            return lambda entry, prefix: skipped(prefix, [entry], fused)
    if attr == "dynamic":
        override = fn("vllm.model_executor.layers.quantization.utils.gptq_utils", "get_dynamic_override")
        if override is not None:
            def gptq(entry: str, prefix: str) -> bool:
                with _narrowed(quant_config, attr, {entry: quant_config.dynamic[entry]}):
                    return override(quant_config, layer_name=prefix) is False
            return gptq
    return None


def match_entries(quant_config: Any, get_quant_method: Any,
                  layers: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """layers: (model, prefix, layer object). Returns {attr, entries: {entry: [model:prefix...]}}."""
    attr = exclusion_attr(quant_config)
    if attr is None:
        return {"attr": None, "entries": {}}
    full = getattr(quant_config, attr)
    entries = list(full.keys()) if isinstance(full, dict) else list(full)
    if attr == "dynamic":
        # Only negative (`-:`) dynamic keys exclude; positive ones override bits.
        entries = [e for e in entries if str(e).startswith("-:")]
    direct = direct_matcher(quant_config, attr)
    if direct is not None:
        result: dict[str, list[str]] = {}
        errors: dict[str, str] = {}
        for entry in entries:
            hits = []
            for model, prefix, _layer in layers:
                try:
                    if direct(entry, prefix):
                        hits.append(f"{model}:{prefix}")
                except Exception as exc:  # e.g. "different quantization schemes for the shards"
                    errors[str(entry)] = str(exc)[:300]
                    hits.append(f"{model}:{prefix}")
            result[str(entry)] = hits
        return {"attr": attr, "matcher": "direct", "entries": result, "errors": errors}
    empty: Any = {} if isinstance(full, dict) else []
    baseline: dict[tuple[str, str], bool | None] = {}
    layers = [t for t in layers if t[2] is not None]  # re-asking needs the layer object
    with _narrowed(quant_config, attr, empty):
        for model, prefix, layer in layers:
            baseline[(model, prefix)] = _excluded(quant_config, get_quant_method, layer, prefix)
    result: dict[str, list[str]] = {}
    for entry in entries:
        narrowed = {entry: full[entry]} if isinstance(full, dict) else [entry]
        hits: list[str] = []
        with _narrowed(quant_config, attr, narrowed):
            for model, prefix, layer in layers:
                if baseline[(model, prefix)]:
                    continue  # unquantized anyway: the entry changes nothing here
                if _excluded(quant_config, get_quant_method, layer, prefix):
                    hits.append(f"{model}:{prefix}")
        result[str(entry)] = hits
    return {"attr": attr, "matcher": "outcome", "entries": result}


def as_written(result: dict[str, Any], declared: Any) -> dict[str, str]:
    """The config's own spelling of each entry, where vLLM rewrote the list into its runtime
    namespace first (compressed-tensors `apply_vllm_mapper` with the model's
    hf_to_vllm_mapper): {entry as matched: entry as written}."""
    if not isinstance(declared, dict) or result.get("attr") is None:
        return {}
    written = declared.get(result["attr"])
    matched = list(result.get("entries", {}))
    if not isinstance(written, list) or len(written) != len(matched):
        return {}
    return {m: str(w) for m, w in zip(matched, written) if m != str(w)}
