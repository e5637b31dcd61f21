"""A draft from its own checkpoint (`mtplint TARGET --draft PATH [--method M]`), or a drafter
the target carries that is not served as MTP (`mtplint TARGET --method dspark`).

EAGLE/EAGLE3 heads, DFlash/DSpark drafts, plain draft models and assistant drafts served as
`"method": "mtp"` ship as a checkpoint of their own, served with `--speculative-config
'{"method": M, "model": PATH}'`. The lint's subject is then the draft: findings name its
files, and the target contributes its configuration and which of its parameters the draft
shares. `--method` is any method the probed release declares (lint/pipeline/spec_methods.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.schema import Settings
from ..core.errors import BadInput
from ..inventory.model import Inventory
from . import spec_methods

# Architectures vLLM 0.33.0 builds as a DFlash / DSpark draft (model_executor/models/registry.py;
# config/speculative.py detects MuseGlimmerAssistantModel and the DSpark ones itself).
_DFLASH_ARCHS = ("DFlashDraftModel", "DFlash2DraftModel", "DFlash2BeamDraftModel", "LiLiCorrDraftModel")
_DSPARK_ARCHS = (
    "Qwen3DSparkModel",
    "Qwen3OmniDSparkModel",
    "MuseSparkDSparkModel",
    "Gemma4DSparkModel",
    "K3DSparkModel",
)


def check_usage(s: Settings, paths: int) -> None:
    """Usage errors, before anything is read."""
    method = s.method
    if method and not s.draft and _needs_draft(method):
        raise BadInput(
            f"--method {method} needs --draft PATH (only {' and '.join(spec_methods.EMBEDDED)} are "
            "read from the target's own checkpoint)"
        )
    if s.draft and paths > 1:
        raise BadInput("--draft belongs to one target: pass one PATH with it")
    if method and paths > 1:
        raise BadInput(f"--method {method} belongs to one target: pass one PATH with it")


def _needs_draft(method: str) -> bool:
    # An unknown name is judged later against the probed release's own list.
    known = method in spec_methods.FALLBACK and method not in spec_methods.MODEL_FREE
    return known and method not in spec_methods.EMBEDDED


def load_draft(s: Settings, progress: Any = None) -> tuple[Inventory, str] | None:
    """The draft's inventory and the speculative method it is served with; None without --draft."""
    from ..inventory.checkpoint import load_companion

    given = s.draft
    if not given:
        return None
    inventory = load_companion(Path(given), "the --draft checkpoint", progress)
    return inventory, method_for(inventory, s.method)


def speculative_request(s: Settings, draft: tuple[Inventory, str] | None, python: str | None) -> dict[str, str]:
    """The probe request's `speculative` field: {"method": M} for a separate draft or an embedded
    drafter other than MTP, {} for the target's own MTP block. The method is checked against
    the methods the probed release declares (read from its source)."""
    given = s.method
    method = draft[1] if draft else given
    if method is None:
        return {}
    declared = spec_methods.declared(python)
    methods = declared or spec_methods.FALLBACK
    if method not in methods and method != "[ngram]":
        source = (
            "the probed vLLM declares"
            if declared
            else "vLLM 0.33.0 declares (the probed release's list was unreadable)"
        )
        raise BadInput(f"--method {method}: not a speculative method {source}: {spec_methods.listing(methods)}")
    method = spec_methods.canonical(method, methods)
    if method in spec_methods.MODEL_FREE:
        raise BadInput(
            f"--method {method} proposes without a draft model (nothing is built from a checkpoint): "
            "nothing for mtplint to lint; lint the target without --method"
        )
    if draft is None and method == "mtp":
        return {}  # the target's own MTP block, as without --method
    return {"method": method}


def method_for(inventory: Inventory, given: str | None) -> str:
    """The method vLLM is asked for: as given, else read as vLLM 0.33.0 reads it
    (config/speculative.py: the model's name, DFlash/DSpark architectures, an MTP model_type,
    else `draft_model`), plus the registry's EAGLE/EAGLE3/MTP head names (`*Eagle3*`, `Eagle*`,
    `*MTP*`) and assistants' model_type; a given method that they contradict is bad input."""
    archs = [a for a in inventory.config.get("architectures") or [] if isinstance(a, str)]
    model_type = inventory.config.get("model_type")
    named = _named_method(archs, model_type if isinstance(model_type, str) else "")
    where = inventory.origin or str(inventory.root)
    if named is None and given is None:
        named = _named_by_path(where)
    if given:
        if named is not None and named != given and given != "draft_model":
            raise BadInput(
                f"--method {given} contradicts architectures {archs}, which vLLM builds as a {named} draft; "
                f"drop --method or pass --method {named}",
                path=_config_name(inventory),
            )
        return given
    # vLLM's own default: a draft it cannot place is an independent draft model.
    return named or "draft_model"


def _named_method(archs: list[str], model_type: str) -> str | None:
    if any(a in _DFLASH_ARCHS or a == "MuseGlimmerAssistantModel" or a.startswith("DFlash") for a in archs):
        return "dflash"
    if any(a in _DSPARK_ARCHS for a in archs) or ("DSparkDraftModel" in archs and model_type == "qwen3"):
        return "dspark"
    lowered = [a.lower() for a in archs]
    if any("eagle3" in a for a in lowered):
        return "eagle3"
    if any("eagle" in a for a in lowered):
        return "eagle"
    # MTP heads and assistants (Gemma4AssistantForCausalLM, model_type gemma4_assistant, which
    # vLLM rewrites to its `gemma4_mtp` MTP type).
    if any("mtp" in a or "assistant" in a for a in lowered) or "mtp" in model_type or model_type.endswith("_assistant"):
        return "mtp"
    return None


def _named_by_path(where: str) -> str | None:
    """vLLM's own guess from the model's name (yuhuili/EAGLE-LLaMA3-Instruct-8B,
    AngelSlim/Qwen3-8B_eagle3, z-lab/*-DFlash-*, deepseek-ai/dspark_qwen3_8b_block7:
    vllm/config/speculative.py), in its order."""
    name = where.rstrip("/").rsplit("/", 1)[-1].split("@", 1)[0].lower()
    for marker, method in (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark")):
        if marker in name:
            return method
    return None


def _config_name(inventory: Inventory) -> str:
    return f"{inventory.origin}/config.json" if inventory.origin else str(inventory.config_path)
