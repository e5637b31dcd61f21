"""What quantization the checkpoint declares, read the way vLLM reads it.

vLLM takes config.json `quantization_config` first (else `compression_config`, else the
text_config's), and falls back to hf_quant_config.json only when config.json has none.
`method` is vLLM's normalized quant_method; model-specific overrides that do not depend on
the GPU (DeepSeek-V4, gpt-oss) go in details["vllm_method"].
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .model import DeclaredQuant

CONFIG = "config.json"
HF_QUANT = "hf_quant_config.json"

_MODELOPT_ALGO_METHOD = {
    "FP8": "modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN": "modelopt",
    "FP8_PB_WO": "modelopt",
    "NVFP4": "modelopt_fp4",
    "W4A16_NVFP4": "modelopt_fp4",
    "MXFP8": "modelopt_mxfp8",
    "MIXED_PRECISION": "modelopt_mixed",
}
_GENERIC_EXCLUSION_KEYS = ("ignore", "exclude_modules", "ignored_layers", "modules_to_not_convert", "exclude")


# msModelSlim's export description (vllm-ascend reads it under `--quantization ascend`).
MODELSLIM = "quant_model_description.json"


def parse_declared(config: dict, hf_quant_config: dict | None, root: Path) -> DeclaredQuant:
    root = Path(root)
    qc, key = find_quant_config(config)
    _refuse_without_loader(config, qc, root)
    if qc is None:
        if hf_quant_config is None:
            return DeclaredQuant(method=None, source=None)
        return _parse_modelopt(hf_quant_config, "", str(root / HF_QUANT), HF_QUANT, None)
    cfg_path = str(root / CONFIG)
    if not isinstance(qc, dict):
        raise BadInput(f"{key} must be an object, got {_type(qc)}", path=cfg_path)
    written = qc.get("quant_method")
    if written is not None and not isinstance(written, str):
        raise BadInput(f"{key}.quant_method must be a string, got {_type(written)}", path=cfg_path)
    method = _normalize_method(qc)
    if method is None:
        d = DeclaredQuant(method=None, source=CONFIG, raw=copy.deepcopy(qc))
        d.details["quant_method"] = written
        return d
    d = _parse_method(method, qc, key, cfg_path, config, hf_quant_config)
    d.method = method
    d.source = CONFIG
    d.raw = copy.deepcopy(qc)
    d.details["quant_method"] = written
    if method == "mxfp4" and config.get("model_type") == "gpt_oss":
        d.details["vllm_method"] = "gpt_oss_mxfp4"
    return d


def _refuse_without_loader(config: dict, qc: Any, root: Path) -> None:
    """Producers whose declaration no vLLM quantization method reads (none of vLLM's
    QUANTIZATION_METHODS, 0.33.0 included, is MLX or ModelSlim): vLLM builds every layer
    unquantized over their packed tensors, so a lint of the MTP draft would only list the
    consequences. Said in one line instead. (A hub checkpoint's ModelSlim file is seen only
    where the small-file fetch brought it.)"""
    has_method = isinstance(qc, dict) and bool(qc.get("quant_method"))
    mlx = config.get("quantization")
    if isinstance(mlx, dict) and "bits" in mlx and "group_size" in mlx and not has_method:
        raise BadInput(
            f"quantization {{bits: {mlx['bits']}, group_size: {mlx['group_size']}}} without a quant_method is an "
            "MLX (mlx-lm) checkpoint: vLLM has no loader for it (it builds every layer unquantized)",
            path=str(root / CONFIG),
        )
    description = root / MODELSLIM
    if qc is None and description.is_file():
        kind = "?"
        with contextlib.suppress(OSError, ValueError):
            import json

            body = json.loads(description.read_text(encoding="utf-8"))
            kind = str(body.get("model_quant_type", "?")) if isinstance(body, dict) else "?"
        raise BadInput(
            f"a ModelSlim export ({kind}): vLLM reads no {MODELSLIM} and has no loader for it (vllm-ascend's "
            "`--quantization ascend` does); it builds every layer unquantized",
            path=str(description),
        )


def _parse_method(
    method: str, qc: dict, key: str, cfg_path: str, config: dict, hf_quant_config: dict | None
) -> DeclaredQuant:
    """The declared quantization, read by its format's own parser."""
    if method == "compressed-tensors":
        return _parse_compressed_tensors(qc, key, cfg_path)
    if method.startswith("modelopt"):
        return _parse_modelopt(qc, key + ".", cfg_path, CONFIG, hf_quant_config)
    if method == "fp8":
        return _parse_fp8(qc, key, cfg_path, config)
    if method == "gptq":
        return _parse_gptq(qc, key, cfg_path)
    if method == "awq":
        return _parse_awq(qc, key, cfg_path)
    if method == "quark":
        return _parse_quark(qc, key, cfg_path)
    return _parse_generic(qc, key, cfg_path, method)


def find_quant_config(config: dict) -> tuple[Any, str]:
    if config.get("quantization_config") is not None:
        return config["quantization_config"], "quantization_config"
    if config.get("compression_config") is not None:
        return config["compression_config"], "compression_config"
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("quantization_config") is not None:
        return text["quantization_config"], "text_config.quantization_config"
    return None, ""


def _normalize_method(qc: dict) -> str | None:
    """vLLM's `_normalize_quantization_config` plus the ModelOpt quant_algo overrides."""
    nested = qc.get("quantization")
    producer = qc.get("producer")
    producer_name = producer.get("name") if isinstance(producer, dict) else None
    method = str(qc.get("quant_method") or "").lower().replace("compressed_tensors", "compressed-tensors")
    if producer_name == "modelopt" or (isinstance(nested, dict) and "modelopt_quant_config" in nested):
        method = method or "modelopt"
    if method.startswith("modelopt"):
        algo = _modelopt_algo(qc)
        if algo is not None:
            method = _MODELOPT_ALGO_METHOD.get(algo) or ("modelopt_fp4" if "FP4" in algo else method)
    return method or None


def _modelopt_algo(qc: dict) -> str | None:
    nested = qc.get("quantization")
    algo = nested.get("quant_algo") if isinstance(nested, dict) else qc.get("quant_algo")
    return str(algo).upper() if algo else None


def _parse_compressed_tensors(qc: dict, key: str, where: str) -> DeclaredQuant:
    """Validated with compressed-tensors' own models. That import costs seconds (torch,
    transformers), so a config that validated before is served from the cache: a warm
    lint must not pay for it."""
    import hashlib
    import json

    from ..core.cache_dirs import cache_root, read_entry, write_entry

    digest = hashlib.sha256(json.dumps([key, qc], sort_keys=True, default=str).encode()).hexdigest()
    memo = cache_root() / "declared" / f"{digest}.json"
    try:
        d = json.loads(read_entry(memo) or b"")
        return DeclaredQuant(
            method=d["method"],
            source=d["source"],
            exclusions=d["exclusions"],
            exclusion_key=d["exclusion_key"],
            details=d["details"],
        )
    except (OSError, ValueError, KeyError):
        pass
    declared = _validate_compressed_tensors(qc, key, where)
    with contextlib.suppress(TypeError, ValueError):
        body = {
            "method": declared.method,
            "source": declared.source,
            "exclusions": declared.exclusions,
            "exclusion_key": declared.exclusion_key,
            "details": declared.details,
        }
        write_entry(memo, json.dumps(body, default=str).encode())
    return declared


def _validate_compressed_tensors(qc: dict, key: str, where: str) -> DeclaredQuant:
    import pydantic
    from compressed_tensors import QuantizationConfig

    try:
        parsed = QuantizationConfig.model_validate(copy.deepcopy(qc))
    except pydantic.ValidationError as e:
        raise BadInput(f"invalid compressed-tensors config: {_pydantic_problem(e, key)}", path=where) from e
    except (KeyError, ValueError, TypeError, NotImplementedError) as e:
        # Raised outside pydantic's validators, e.g. an unknown preset scheme group name.
        msg = e.args[0] if e.args else type(e).__name__
        raise BadInput(f"invalid compressed-tensors config: {key}.config_groups: {msg}", path=where) from e
    groups = {}
    for name, scheme in parsed.config_groups.items():
        groups[name] = {
            "targets": list(scheme.targets),
            "format": _enum(scheme.format) or parsed.format,
            "weights": _args(scheme.weights),
            "input_activations": _args(scheme.input_activations),
            "output_activations": _args(scheme.output_activations),
        }
    return DeclaredQuant(
        method="compressed-tensors",
        source=CONFIG,
        exclusions=list(parsed.ignore or []),
        exclusion_key=f"{key}.ignore",
        details={
            "format": parsed.format,
            "quantization_status": _enum(parsed.quantization_status),
            "groups": groups,
            "kv_cache_scheme": _args(parsed.kv_cache_scheme),
            "version": qc.get("version"),
            "sparsity_config": qc.get("sparsity_config") or None,
            "transform_config": qc.get("transform_config") or None,
        },
    )


def _args(a: Any) -> dict | None:
    if a is None:
        return None
    return {
        "num_bits": a.num_bits,
        "type": _enum(a.type),
        "strategy": _enum(a.strategy),
        "group_size": a.group_size,
        "block_structure": a.block_structure,
        "symmetric": a.symmetric,
        "dynamic": _enum(a.dynamic),
        "actorder": _enum(a.actorder),
    }


def _enum(v: Any) -> Any:
    return getattr(v, "value", v)


def _pydantic_problem(e: Any, key: str) -> str:
    errors = e.errors()
    # A union field (scheme | list of targets) reports one error per branch; the branch
    # whose container type did not match is noise.
    useful = [er for er in errors if er.get("type") not in ("list_type", "dict_type", "model_type")] or errors
    er = useful[0]
    loc = [str(p) for p in er.get("loc", ()) if not ("[" in str(p) or "(" in str(p))]
    field = ".".join([key, *loc])
    msg = er.get("msg", "invalid")
    got = er.get("input")
    if er.get("type") != "missing" and not isinstance(got, (dict, list)) and len(repr(got)) <= 60:
        msg += f" (got {got!r})"
    return f"{field}: {msg}"


def _parse_modelopt(qc: dict, prefix: str, where: str, source: str, hf_quant_config: dict | None) -> DeclaredQuant:
    """Both the legacy {"producer", "quantization": {...}} form and the flat config.json form."""
    if not isinstance(qc, dict):
        raise BadInput(f"expected a JSON object, got {_type(qc)}", path=where)
    nested = qc.get("quantization")
    if nested is not None:
        if not isinstance(nested, dict):
            raise BadInput(f"{prefix}quantization must be an object, got {_type(nested)}", path=where)
        body, body_key = nested, f"{prefix}quantization"
        ex_name = "exclude_modules"
        kv = body.get("kv_cache_quant_algo")
    else:
        body, body_key = qc, prefix.rstrip(".")
        ex_name = "ignore" if "ignore" in qc else "exclude_modules"  # vLLM reads ignore first
        scheme = qc.get("kv_cache_scheme")
        kv = qc.get("kv_cache_quant_algo")
        if kv is None and isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8:
            kv = "FP8"
    ex_key = f"{body_key}.{ex_name}" if body_key else ex_name
    exclusions = _str_list(body.get(ex_name), ex_key, where)
    algo = body.get("quant_algo")
    method = _MODELOPT_ALGO_METHOD.get(str(algo).upper(), "modelopt") if algo else "modelopt"
    if algo and method == "modelopt" and "FP4" in str(algo).upper():
        method = "modelopt_fp4"
    details: dict[str, Any] = {
        "quant_algo": str(algo).upper() if algo else None,
        "kv_cache_quant_algo": str(kv).upper() if isinstance(kv, str) else kv,
        "group_size": body.get("group_size"),
        "producer": qc.get("producer"),
    }
    layers = body.get("quantized_layers")
    if layers is None and hf_quant_config is not None and method == "modelopt_mixed":
        # vLLM falls back to hf_quant_config.json for a mixed-precision map config.json lacks.
        hq = hf_quant_config.get("quantization", hf_quant_config)
        layers = hq.get("quantized_layers") if isinstance(hq, dict) else None
        if layers is not None:
            details["quantized_layers_source"] = HF_QUANT
    if layers is not None and not isinstance(layers, dict):
        raise BadInput(
            f"{body_key + '.' if body_key else ''}quantized_layers must be an object, got {_type(layers)}", path=where
        )
    details["quantized_layers"] = layers
    if hf_quant_config is not None and source == CONFIG and "quantized_layers_source" not in details:
        details["hf_quant_config_ignored"] = True  # config.json wins in vLLM
    return DeclaredQuant(
        method=method,
        source=source,
        exclusions=exclusions,
        exclusion_key=ex_key,
        details=details,
        raw=copy.deepcopy(qc),
    )


def _parse_fp8(qc: dict, key: str, where: str, config: dict) -> DeclaredQuant:
    ignored = qc.get("ignored_layers")
    # vLLM's Fp8Config reads modules_to_not_convert only when ignored_layers is empty.
    name = (
        "ignored_layers"
        if ignored
        else ("modules_to_not_convert" if qc.get("modules_to_not_convert") else "ignored_layers")
    )
    exclusions = _str_list(qc.get(name), f"{key}.{name}", where)
    block = qc.get("weight_block_size")
    if block is not None and not (
        isinstance(block, list) and len(block) == 2 and all(type(b) is int and b > 0 for b in block)
    ):
        raise BadInput(f"{key}.weight_block_size must be two positive integers, got {block!r}", path=where)
    details = {
        "weight_block_size": block,
        "activation_scheme": qc.get("activation_scheme"),
        "fmt": qc.get("fmt"),
        "scale_fmt": qc.get("scale_fmt"),
        # DeepSeek-V4 keeps expert_dtype at the top of config.json; vLLM defaults it to fp4.
        "expert_dtype": config.get("expert_dtype", qc.get("expert_dtype")),
        "moe_quant_algo": qc.get("moe_quant_algo"),
    }
    if config.get("model_type") == "deepseek_v4":
        details["vllm_method"] = "deepseek_v4_fp8"
    return DeclaredQuant(
        method="fp8", source=CONFIG, exclusions=exclusions, exclusion_key=f"{key}.{name}", details=details
    )


def _parse_gptq(qc: dict, key: str, where: str) -> DeclaredQuant:
    dynamic = qc.get("dynamic") or {}
    if not isinstance(dynamic, dict):
        raise BadInput(f"{key}.dynamic must be an object, got {_type(dynamic)}", path=where)
    blocks = qc.get("modules_in_block_to_quantize")
    if blocks is not None and not isinstance(blocks, list):
        raise BadInput(f"{key}.modules_in_block_to_quantize must be a list, got {_type(blocks)}", path=where)
    details = {k: qc.get(k) for k in ("bits", "group_size", "desc_act", "sym", "checkpoint_format")}
    details.update(lm_head=bool(qc.get("lm_head", False)), dynamic=dynamic, modules_in_block_to_quantize=blocks)
    # "-:regex" entries are the skips; positive entries override bits/group_size instead.
    skips = [k for k in dynamic if isinstance(k, str) and k.startswith("-:")]
    return DeclaredQuant(
        method="gptq", source=CONFIG, exclusions=skips, exclusion_key=f"{key}.dynamic", details=details
    )


def _parse_awq(qc: dict, key: str, where: str) -> DeclaredQuant:
    exclusions = _str_list(qc.get("modules_to_not_convert"), f"{key}.modules_to_not_convert", where)
    details = {
        "bits": qc.get("w_bit", qc.get("bits")),
        "group_size": qc.get("q_group_size", qc.get("group_size")),
        "zero_point": qc.get("zero_point"),
        "version": qc.get("version"),
        "lm_head": bool(qc.get("lm_head", False)),
    }
    return DeclaredQuant(
        method="awq",
        source=CONFIG,
        exclusions=exclusions,
        exclusion_key=f"{key}.modules_to_not_convert",
        details=details,
    )


def _parse_quark(qc: dict, key: str, where: str) -> DeclaredQuant:
    """AMD Quark's export config as vLLM's QuarkConfig reads it (vLLM 0.33.0 quark/quark.py):
    `exclude` (exact names and `re:` patterns; a routed-experts layer is excluded whole when
    any child of it is listed), `global_quant_config`, per-name `layer_quant_config` and
    per-class `layer_type_quant_config` overrides, and `export`. A config the probed vLLM
    refuses (no `export`: QuarkConfig.from_config) is left to the probe, which says so in
    that release's words (MTP009), as is any other part it cannot read."""
    export = _obj(qc.get("export"))
    weight = _obj(_obj(qc.get("global_quant_config")).get("weight"))
    details = {
        "weight_dtype": weight.get("dtype"),
        "layer_quant_config": sorted(_obj(qc.get("layer_quant_config"))),
        "layer_type_quant_config": sorted(_obj(qc.get("layer_type_quant_config"))),
        "pack_method": export.get("pack_method"),
        "kv_cache_group": export.get("kv_cache_group"),
        "version": qc.get("version"),
    }
    return DeclaredQuant(
        method="quark",
        source=CONFIG,
        exclusions=_str_list(qc.get("exclude"), f"{key}.exclude", where),
        exclusion_key=f"{key}.exclude",
        details=details,
    )


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _parse_generic(qc: dict, key: str, where: str, method: str) -> DeclaredQuant:
    for name in _GENERIC_EXCLUSION_KEYS:
        if qc.get(name) is not None:
            return DeclaredQuant(
                method=method,
                source=CONFIG,
                exclusions=_str_list(qc[name], f"{key}.{name}", where),
                exclusion_key=f"{key}.{name}",
            )
    return DeclaredQuant(method=method, source=CONFIG)


def _str_list(value: Any, field: str, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput(f"{field} must be a list of strings, got {_type(value)}", path=where)
    return list(value)


def _type(v: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(v), type(v).__name__)
