"""How each family names its MTP layers on disk, and where its config says how many there are.

One owner for the on-disk MTP naming, in the style of vLLM's `_rewrite_spec_layer_name`:
the checks, the fixer and the runtime patches call these pure functions instead of
matching names themselves. The layouts, as vLLM 0.33.0's MTP loaders read them:

| family                         | on-disk MTP layer prefix        | depth key                     |
|--------------------------------|---------------------------------|-------------------------------|
| DeepSeek-V4 (deepseek_v4/mtp)  | `mtp.{i}.`                      | `num_nextn_predict_layers`    |
| DeepSeek-V3/V3.2, GLM-4.x/5.x  | `model.layers.{N+i}.`           | `num_nextn_predict_layers`    |
| Qwen3-Next, Qwen3.5 (+ VL)     | `mtp.layers.{i}.` (+ shared `mtp.fc`, `mtp.norm`, ...) | `mtp_num_hidden_layers` |
| MiMo                           | `model.mtp_layers.{i}.`         | `num_nextn_predict_layers`    |
| ERNIE-4.5 MoE                  | `model.mtp_{block,emb_norm,...}.{i}.` | `num_nextn_predict_layers` |
| Nemotron-H                     | `mtp.layers.{j}.` (*)           | `num_nextn_predict_layers`    |
| MiniMax-M3 (minimax_m3_vl)     | `language_model.model.mtp.layers.{i}.` | `num_mtp_modules`      |

(*) one MTP step is `len(mtp_hybrid_override_pattern)` physical layers (nemotron_h_mtp.py).

N is the config's `num_hidden_layers` (of `text_config` for wrapped models). A leading
`model.`/`language_model.`/`model.language_model.` is accepted where exporters add one.

Qwen3-Next configs carry no depth key: vLLM 0.33.0's `Qwen3NextMTP` reads
`getattr(config, "num_nextn_predict_layers", 1)` (qwen3_next_mtp.py), so the depth it builds is 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# The config keys that hold the MTP depth, in the order vLLM's configs consult them.
DEPTH_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", "n_mtp_layers")
DEFAULT_DEPTH_KEY = "num_nextn_predict_layers"
# Families whose vLLM MTP loader reads one key only, with a default when the config lacks it
# (model_type -> (key, depth vLLM builds without the key)): vLLM 0.33.0 qwen3_next_mtp.py:63.
# MiniMax-M3 configs carry `num_mtp_modules` and may carry `num_nextn_predict_layers` beside it
# (the published BF16 text_config: 7 and 1); vLLM 0.33.0 builds `num_mtp_modules` layers
# (config/speculative.py:1131, `getattr(hf_config, "num_mtp_modules", 1)`) and never reads the other.
FAMILY_DEPTH = {
    "qwen3_next": ("num_nextn_predict_layers", 1),
    "minimax_m3_vl": ("num_mtp_modules", 1),
    "minimax_m3_mtp": ("num_mtp_modules", 1),
}
# Families whose depth lives in a section of its own (model_type -> section): vLLM 0.33.0
# config/speculative.py:1087 reads Inkling's `mtp_config.num_nextn_predict_layers` (and
# overwrites the draft's top-level key with it), so a top-level key there is not the depth.
DEPTH_SECTION = {"inkling_model": "mtp_config", "inkling_mm_model": "mtp_config"}

# `language_model.model.` is the VL wrappers' (MiniMax-M3, Kimi-K3) spelling of the text model.
_WRAPPER = r"(?:model\.)?(?:language_model\.)?(?:model\.)?"
# MTP layer i named by its own index: mtp.{i}. | mtp.layers.{i}. | mtp_layers.{i}. | ERNIE's
# mtp_block.{i}. / mtp_emb_norm.{i}. / ...
_OWN_INDEX = re.compile(rf"^{_WRAPPER}mtp(?:\.layers\.|_[a-z_]+\.|\.)(\d+)\.")
# A trunk-numbered layer: layers.{k}. (an MTP layer when k >= num_hidden_layers)
_TRUNK_INDEX = re.compile(rf"^{_WRAPPER}layers\.(\d+)\.")
# Parts of an MTP block that are not per-layer (Qwen3-Next/3.5 `mtp.fc`, `mtp.norm`).
_SHARED_MTP = re.compile(rf"^{_WRAPPER}mtp[._]")


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The part of a config that describes the language model (`text_config` of VL wrappers)."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" in text:
        return text
    return config


def num_hidden_layers(config: Mapping[str, Any]) -> int | None:
    n = text_config(config).get("num_hidden_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def depth_field(config: Mapping[str, Any]) -> tuple[str, Any]:
    """(dotted config key, value) of the MTP depth the config declares; the default key and
    None when it declares none. For a family whose loader reads one key only, that key."""
    keys: tuple[str, ...] = DEPTH_KEYS
    if (family := FAMILY_DEPTH.get(str(config.get("model_type")))) is not None:
        keys = (family[0],)
    holders: tuple[tuple[Any, str], ...] = ((config, ""), (config.get("text_config"), "text_config."))
    if (section := DEPTH_SECTION.get(str(config.get("model_type")))) is not None:
        holders, keys = ((config.get(section), f"{section}."),), (DEFAULT_DEPTH_KEY,)
        if not isinstance(holders[0][0], Mapping) or DEFAULT_DEPTH_KEY not in holders[0][0]:
            return f"{section}.{DEFAULT_DEPTH_KEY}", None
    for holder, prefix in holders:
        if not isinstance(holder, Mapping):
            continue
        for key in keys:
            if key in holder:
                return prefix + key, holder[key]
    return keys[0] if keys != DEPTH_KEYS else DEFAULT_DEPTH_KEY, None


def declared_depth(config: Mapping[str, Any]) -> int:
    """The MTP depth the config declares (0 when none or not an integer)."""
    value = depth_field(config)[1]
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def vllm_depth(config: Mapping[str, Any]) -> tuple[str, int]:
    """(dotted config key, MTP depth vLLM builds the draft with): the declared depth, or the
    family loader's default where the config has no key (0 for an unknown family)."""
    key, value = depth_field(config)
    if value is None and (family := FAMILY_DEPTH.get(str(config.get("model_type")))) is not None:
        return key, family[1]
    return key, declared_depth(config)


def layers_per_step(config: Mapping[str, Any]) -> int:
    """On-disk MTP layers per MTP step: Nemotron-H builds `len(mtp_hybrid_override_pattern)`
    physical `mtp.layers.{j}` per step (nemotron_h_mtp.py); every other family one."""
    pattern = text_config(config).get("mtp_hybrid_override_pattern")
    return len(pattern) if isinstance(pattern, str) and pattern else 1


def mtp_layer_index(name: str, n_hidden: int | None) -> int | None:
    """The MTP layer (0-based) an on-disk tensor or module name belongs to, or None."""
    if m := _OWN_INDEX.match(name):
        return int(m.group(1))
    if n_hidden is not None and (m := _TRUNK_INDEX.match(name)):
        k = int(m.group(1))
        return k - n_hidden if k >= n_hidden else None
    return None


def layer_role(name: str) -> str | None:
    """A per-layer name without its layer prefix, so one layer's module can be compared with
    the same module of any other layer, trunk or MTP (`mtp.0.ffn.experts.3.w1` and
    `layers.5.ffn.experts.3.w1` -> `ffn.experts.3.w1`); None for a name outside any layer."""
    for pattern in (_OWN_INDEX, _TRUNK_INDEX):
        if m := pattern.match(name):
            return name[m.end() :]
    return None


def is_mtp_name(name: str, n_hidden: int | None) -> bool:
    """True for any on-disk name of the MTP block, per-layer or shared."""
    return mtp_layer_index(name, n_hidden) is not None or bool(_SHARED_MTP.match(name))


# Components of the longest name head the index patterns read (`model.language_model.mtp.
# layers.{i}.`): a name's MTP layer is its head's.
_HEAD_PARTS = 5


def name_heads(names: Iterable[str]) -> set[str]:
    """The distinct name heads (first _HEAD_PARTS components) of these names: every MTP
    question about a name is answered by its head. A head is its own head."""
    heads: set[str] = set()
    for name in names:
        parts = name.split(".", _HEAD_PARTS)
        heads.add(".".join(parts[:_HEAD_PARTS]) + "." if len(parts) > _HEAD_PARTS else name)
    return heads


def layers_present(names: Iterable[str], n_hidden: int | None) -> set[int]:
    """Every MTP layer index some name belongs to. Asked once per distinct name head: a
    checkpoint holds hundreds of thousands of names under a few hundred heads (pass
    Inventory.name_heads where the names are a checkpoint's: computed once per lint)."""
    found: set[int] = set()
    for head in name_heads(names):
        i = mtp_layer_index(head, n_hidden)
        if i is not None:
            found.add(i)
    return found


def contiguous_depth(layers: Iterable[int]) -> int:
    """How many MTP layers a loader can build from these: vLLM builds 0..depth-1, so only a
    contiguous run from 0 counts."""
    present = set(layers)
    depth = 0
    while depth in present:
        depth += 1
    return depth


def depth_on_disk(names: Iterable[str], config: Mapping[str, Any]) -> int:
    """The MTP depth (steps) these on-disk names support, for this config's layout."""
    return contiguous_depth(layers_present(names, num_hidden_layers(config))) // layers_per_step(config)


def mtp_name_pattern(config: Mapping[str, Any], depth: int | None = None) -> re.Pattern[str]:
    """A regex matching every on-disk MTP name of this config's layout (layers 0..depth-1
    for trunk-numbered layouts; depth defaults to the declared depth, at least 1)."""
    n = num_hidden_layers(config)
    depth = depth if depth is not None else max(declared_depth(config), 1)
    alts = [rf"{_WRAPPER}mtp[._]", r"model\.mtp_layers\."]
    if n is not None:
        alts.append(rf"{_WRAPPER}layers\.(?:{'|'.join(str(n + i) for i in range(depth))})\.")
    return re.compile("^(?:" + "|".join(alts) + ")")


def layer_group(name: str) -> str | None:
    """The layer prefix of a runtime or on-disk module name (`model.layers.43.`,
    `mtp.layers.0.`), for suggesting one anchored entry instead of many."""
    m = re.match(r"^(model\.)?(mtp\.)?layers\.\d+\.", name)
    return m.group(0) if m else None
