"""A draft from its own checkpoint: `mtplint TARGET --draft PATH [--method eagle3|eagle|mtp]`.

EAGLE/EAGLE3 heads (and assistant drafts served as `"method": "mtp"` with a model) ship as a
checkpoint of their own, served with `--speculative-config '{"method": M, "model": PATH}'`. The
lint's subject is then the draft: findings name its files, and the target contributes its
configuration and which of its parameters the draft shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.schema import Settings
from ..core.errors import BadInput
from ..inventory.model import Inventory

# The methods whose draft vLLM builds from the `model` checkpoint (vllm/config/speculative.py).
METHODS = ("eagle3", "eagle", "mtp")


def check_usage(s: Settings, paths: int) -> None:
    """Usage errors, before anything is read."""
    if s.method and not s.draft:
        raise BadInput("--method needs --draft PATH (a target's own MTP block is always method mtp)")
    if s.draft and paths > 1:
        raise BadInput("--draft belongs to one target: pass one PATH with it")


def load_draft(s: Settings, progress: Any = None) -> tuple[Inventory, str] | None:
    """The draft's inventory and the speculative method it is served with; None without --draft."""
    from ..inventory.checkpoint import load_companion

    given = s.draft
    if not given:
        return None
    inventory = load_companion(Path(given), "the --draft checkpoint", progress)
    return inventory, method_for(inventory, s.method)


def method_for(inventory: Inventory, given: str | None) -> str:
    """The method vLLM is asked for: as given, else read off the draft's architectures (the
    registry names EAGLE3 heads `*Eagle3*`, EAGLE ones `Eagle*`, MTP heads `*MTP*`) or an
    assistant's model_type; a given method that they contradict is bad input."""
    archs = [a for a in inventory.config.get("architectures") or [] if isinstance(a, str)]
    model_type = inventory.config.get("model_type")
    named = _named_method(archs, model_type if isinstance(model_type, str) else "")
    if named is None and given is None:
        named = _named_by_path(inventory.origin or str(inventory.root))
    where = _config_name(inventory)
    if given:
        if named is not None and named != given:
            raise BadInput(
                f"--method {given} contradicts architectures {archs}, which vLLM builds as a {named} draft; "
                f"drop --method or pass --method {named}",
                path=where,
            )
        return given
    if named is None:
        raise BadInput(
            f"cannot tell the speculative method from architectures {archs}: pass --method {'|'.join(METHODS)}",
            path=where,
        )
    return named


def _named_method(archs: list[str], model_type: str) -> str | None:
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
    """vLLM's own guess for a plain-Llama EAGLE head, from the model's name
    (yuhuili/EAGLE-LLaMA3-Instruct-8B, AngelSlim/Qwen3-8B_eagle3: vllm/config/speculative.py)."""
    name = where.rstrip("/").rsplit("/", 1)[-1].split("@", 1)[0].lower()
    if "eagle-" in name:
        return "eagle"
    if "eagle3" in name:
        return "eagle3"
    return None


def _config_name(inventory: Inventory) -> str:
    return f"{inventory.origin}/config.json" if inventory.origin else str(inventory.config_path)
