"""config.json checked before the probe (no vLLM import): values vLLM cannot accept, and
sizes that cannot describe the checkpoint on disk, are bad input (exit 2) named by key.

What is checked is what the probed architectures (DeepSeek-V2/V3/V4, GLM-4.x MoE, MiMo /
Qwen2, Qwen3-Next, Qwen3.5) read to size their layers: a string where vLLM computes with an
integer fails deep inside it; a zero head count, a top-k above the expert count or a zero
expert-group count builds on meta tensors without complaint and would lint clean.

"Far beyond the tensors" is measured against the layer indices the tensor names hold: the
probe builds every layer the config declares, so `num_nextn_predict_layers: 1000000` ran
vLLM for 9.5 minutes and 12 GB. A config may declare more layers than the checkpoint
ships (a dropped MTP block is a finding, MTP006, as is a missing decoder layer), so only
what cannot be a mistake of that kind is refused: an MTP depth above max(16, 4 x the MTP
layers on disk), or a layer count above max(128, 4 x the decoder layers on disk). The
floors (16 MTP layers, 128 decoder layers) are above every released MTP model and keep a
checkpoint whose tensors lack layers entirely (an MTP-less export) lintable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import BadInput
from ..core.mtp_layout import depth_field, layers_present, num_hidden_layers, text_config
from ..inventory.model import Inventory

MTP_DEPTH_FLOOR, MTP_DEPTH_FACTOR = 16, 4
LAYER_FLOOR, LAYER_FACTOR = 128, 4

# Integer keys vLLM sizes layers or divides by: must be >= 1.
_POSITIVE = (
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "vocab_size",
    "moe_intermediate_size",
    "num_key_value_heads",
    "head_dim",
    "n_group",
    "topk_group",
    "kv_lora_rank",
    "q_lora_rank",
    "v_head_dim",
    "max_position_embeddings",
    "moe_layer_freq",
    "o_groups",
    "o_lora_rank",
    "index_n_heads",
    "index_head_dim",
    "index_topk",
    "hc_mult",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "full_attention_interval",
    "decoder_sparse_step",
    "sliding_window",
)
# Integer keys where 0 means "none" (no shared expert, no dense prefix, a dense model).
_NON_NEGATIVE = (
    "intermediate_size",
    "n_routed_experts",
    "num_experts",
    "num_experts_per_tok",
    "n_shared_experts",
    "first_k_dense_replace",
    "num_hash_layers",
    "qk_nope_head_dim",
    "qk_rope_head_dim",  # 0 in GLM-5.3-Flash (glm5_next: MLA without RoPE dims)
    "shared_expert_intermediate_size",
    "max_window_layers",
)
# May be null where the architecture then derives the value (q_lora_rank: no query LoRA).
_NULLABLE = {"q_lora_rank", "sliding_window", "head_dim", "num_key_value_heads", "max_window_layers"}
_NUMBERS = ("rms_norm_eps", "rope_theta", "routed_scaling_factor", "partial_rotary_factor", "hc_eps", "swiglu_limit")
_PER_LAYER_NUMBERS = {"rope_theta"}
_PER_LAYER_FLAGS = {"moe_layer_freq"}
_STRINGS = ("model_type", "hidden_act", "scoring_func", "topk_method")
_FLAGS = (
    "tie_word_embeddings",
    "attention_bias",
    "norm_topk_prob",
    "use_qk_norm",
    "use_sliding_window",
    "attn_output_gate",
    "mtp_use_dedicated_embeddings",
)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _holders(config: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """The mappings whose keys the language model reads, with the prefix that names them."""
    yield "", config
    text = config.get("text_config")
    if isinstance(text, Mapping):
        yield "text_config.", text


def _problem(config: Mapping[str, Any]) -> str | None:
    for prefix, c in _holders(config):
        why = _int_problem(c) or _type_problem(c) or _relations(c)
        if why is not None:
            return prefix + why
    return None


def _int_problem(c: Mapping[str, Any]) -> str | None:
    for key in _POSITIVE + _NON_NEGATIVE:
        if key not in c or (c[key] is None and key in _NULLABLE):
            continue
        v, lowest = c[key], 1 if key in _POSITIVE else 0
        if key in _PER_LAYER_FLAGS and isinstance(v, list) and v and all(x in (0, 1) for x in v):
            continue  # MiMo-V2: moe_layer_freq is one 0/1 per layer (vLLM mimo_v2.py is_moe_layer)
        if not _is_int(v) or v < lowest:
            return f"{key} must be {'a positive' if lowest else 'a non-negative'} integer, not {_shown(v)}"
    return None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _type_problem(c: Mapping[str, Any]) -> str | None:
    for key in _NUMBERS:
        v = c.get(key)
        if v is None:
            continue
        # Step-3.5 configs give rope_theta per layer (a list; vLLM step3p5.py reads it so).
        per_layer = key in _PER_LAYER_NUMBERS and isinstance(v, list) and v and all(_finite(x) for x in v)
        if not _finite(v) and not per_layer:
            return f"{key} must be a finite number, not {_shown(v)}"
    for key in _STRINGS:
        if key in c and not isinstance(c[key], str):
            return f"{key} must be a string, not {_shown(c[key])}"
    for key in _FLAGS:
        if key in c and c[key] not in (True, False, None):  # 0 and 1 read as false and true
            return f"{key} must be true or false, not {_shown(c[key])}"
    return None


def _get(c: Mapping[str, Any], key: str) -> int | None:
    v = c.get(key)
    return v if _is_int(v) else None


def _relations(c: Mapping[str, Any]) -> str | None:
    """Relations between keys that vLLM's layers assume (each key already has its type)."""
    heads, kv_heads, hidden = _get(c, "num_attention_heads"), _get(c, "num_key_value_heads"), _get(c, "hidden_size")
    mla = c.get("kv_lora_rank") is not None  # DeepSeek's latent attention sizes heads itself
    if heads and kv_heads and not mla and heads % kv_heads:
        return f"num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
    if heads and hidden and not mla and c.get("head_dim") is None and hidden % heads:
        return (
            f"hidden_size = {hidden} is not divisible by num_attention_heads = {heads} "
            "(with no head_dim, the head size is hidden_size / num_attention_heads)"
        )
    experts_key = "n_routed_experts" if "n_routed_experts" in c else "num_experts"
    experts, top_k = _get(c, experts_key), _get(c, "num_experts_per_tok")
    if experts and top_k is not None and not 1 <= top_k <= experts:
        return f"num_experts_per_tok = {top_k} must be from 1 to {experts_key} = {experts}"
    groups, top_groups = _get(c, "n_group"), _get(c, "topk_group")
    if experts and groups and experts % groups:
        return f"{experts_key} = {experts} is not divisible by n_group = {groups}"
    if groups and top_groups and top_groups > groups:
        return f"topk_group = {top_groups} is above n_group = {groups}"
    return None


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|mtp_layers|h|blocks)\.(\d+)\.")


def _layers_on_disk(names: Iterable[str]) -> int:
    """How many numbered layers the tensor names reach (highest index + 1)."""
    return max((int(m.group(1)) + 1 for n in names if (m := _LAYER_INDEX.search(n))), default=0)


def _size_problem(config: Mapping[str, Any], names: Iterable[str]) -> str | None:
    n = num_hidden_layers(config)
    if n is not None:
        on_disk = _layers_on_disk(names)
        ceiling = max(LAYER_FLOOR, LAYER_FACTOR * on_disk)
        if n > ceiling:
            key = "num_hidden_layers" if text_config(config) is config else "text_config.num_hidden_layers"
            return (
                f"{key} = {n} cannot describe this checkpoint: its tensors name {on_disk} layer(s), and mtplint "
                f"refuses more than max({LAYER_FLOOR}, {LAYER_FACTOR} x that) = {ceiling} before vLLM builds "
                "every one of them"
            )
    key, depth = depth_field(config)
    if depth is None:
        return None
    if not _is_int(depth) or depth < 0:
        return f"{key} must be a non-negative integer (the number of MTP layers), not {_shown(depth)}"
    on_disk = max(layers_present(names, n), default=-1) + 1
    ceiling = max(MTP_DEPTH_FLOOR, MTP_DEPTH_FACTOR * on_disk)
    if depth > ceiling:
        return (
            f"{key} = {depth} cannot describe this checkpoint: its tensors hold {on_disk} MTP layer(s), and "
            f"mtplint refuses an MTP depth above max({MTP_DEPTH_FLOOR}, {MTP_DEPTH_FACTOR} x that) = {ceiling} "
            "before vLLM builds every one of them"
        )
    return None


# Exclusion lists, GPTQ `dynamic` rules and the like are matched against every module vLLM
# builds, some as regexes: a list far longer than the checkpoint has modules is no mistake of
# an exporter, and 20,006 `dynamic` keys ran the probe into its 10-minute timeout.
RULE_LIST_FLOOR, RULE_LIST_FACTOR = 1024, 2


def _longest_list(node: Any, key: str, depth: int = 0) -> tuple[str, int]:
    """The longest list or mapping under a quantization config, and its dotted key."""
    best = (key, len(node)) if isinstance(node, (list, Mapping)) else (key, 0)
    if depth > 8:
        return best
    children = node.items() if isinstance(node, Mapping) else enumerate(node) if isinstance(node, list) else ()
    for k, v in children:
        if isinstance(v, (list, Mapping)):
            sub = _longest_list(v, f"{key}.{k}" if isinstance(k, str) else f"{key}[{k}]", depth + 1)
            best = max(best, sub, key=lambda kv: kv[1])
    return best


def _rule_list_problem(inventory: Inventory) -> tuple[str, str] | None:
    ceiling = max(RULE_LIST_FLOOR, RULE_LIST_FACTOR * len(inventory.modules))
    sources = []
    config = inventory.config
    for prefix, c in _holders(config):
        if isinstance(c.get("quantization_config"), Mapping):
            sources.append((str(inventory.config_path), f"{prefix}quantization_config", c["quantization_config"]))
    if isinstance(inventory.hf_quant_config, Mapping):
        sources.append((str(inventory.root / "hf_quant_config.json"), "hf_quant_config", inventory.hf_quant_config))
    for path, name, qc in sources:
        key, size = _longest_list(qc, name)
        if size > ceiling:
            return path, (
                f"{key} has {size} entries, more than max({RULE_LIST_FLOOR}, {RULE_LIST_FACTOR} x the "
                f"{len(inventory.modules)} modules on disk) = {ceiling}: mtplint refuses it before vLLM matches "
                "every one against every module it builds"
            )
    return None


def check_config(inventory: Inventory) -> None:
    """BadInput naming config.json and the key when vLLM could not take this config, or it
    declares far more layers than the checkpoint holds, or a quantization rule list far longer
    than its modules."""
    config = inventory.config
    if not isinstance(config, Mapping):
        return  # the inventory reports a config.json that is not an object
    why = _problem(config) or _size_problem(config, inventory.name_heads)
    if why:
        raise BadInput(why, path=str(inventory.config_path))
    too_long = _rule_list_problem(inventory)
    if too_long:
        raise BadInput(too_long[1], path=too_long[0])


# --- what vLLM itself said while building the config (the probe's config stage) ----------

# Raised by transformers' strict config classes and by vLLM computing with a value of the
# wrong type or a zero: schema errors when they name a key of config.json. A ValueError
# stays a finding (MTP009): vLLM raises those for quantization configs and deployment
# inputs (TP, N) that it refuses on purpose.
_SCHEMA_ERRORS = {"StrictDataclassFieldValidationError", "TypeError", "ZeroDivisionError", "OverflowError"}
_FIELD = re.compile(r"field '([A-Za-z_]\w*)'")


def _named_keys(config: Mapping[str, Any], texts: Iterable[str]) -> list[str]:
    known = {prefix + k: k for prefix, c in _holders(config) for k in c}
    found: list[str] = []
    for text in texts:
        words = _FIELD.findall(text) or re.findall(r"[A-Za-z_]\w*", text)
        for word in words:
            dotted = next((d for d, k in known.items() if k == word), None)
            if dotted and dotted not in found:
                found.append(dotted)
        if found:
            break
    return found


def raise_for_config_error(inventory: Inventory, error: Any) -> None:
    """The probe's config-stage error as bad input, when it is a type or value vLLM cannot
    take and names a key of config.json. Other config-stage errors stay findings."""
    if error is None or error.type not in _SCHEMA_ERRORS or _declares_no_mtp(inventory.config):
        return  # depth 0 is honest for a checkpoint without MTP: vLLM's refusal is a finding
    frame = error.frame
    keys = _named_keys(inventory.config, [error.message, (frame.code or "") if frame else ""])
    if not keys:
        return
    message = " ".join(error.message.split())
    where = f" (raised at {frame.file}:{frame.line})" if frame else ""
    raise BadInput(
        f"vLLM cannot accept {' / '.join(keys)}: {error.type}: {message}{where}",
        path=str(inventory.config_path),
    )


def _declares_no_mtp(config: Mapping[str, Any]) -> bool:
    depth = depth_field(config)[1]
    return _is_int(depth) and depth == 0


def explain_depth_zero(inventory: Inventory, error: Any) -> None:
    """An MTP depth of 0 is honest for a checkpoint without MTP (`mtplint fix` writes it), so
    vLLM refusing --speculative-config method=mtp for it stays a finding; its message says
    why instead of showing vLLM's bare ZeroDivisionError."""
    if error is None or not _declares_no_mtp(inventory.config) or "declares no MTP layer" in error.message:
        return
    key = depth_field(inventory.config)[0]
    error.message = (
        f"{key} = 0: config.json declares no MTP layer, and vLLM refuses --speculative-config "
        f"method=mtp for it ({error.message})"
    )
