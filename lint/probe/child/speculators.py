"""Which of vLLM's speculative proposers builds a method's draft, and the draft VllmConfig
of those that build it their own way.

- `draft_model`: `DraftModelProposer` (v1/spec_decode/draft_model.py) builds the draft from its
  own ModelConfig with `quant_config=None`, so VllmConfig's post-init makes the draft's own
  quant config; it shares neither embedding nor head, and refuses a draft whose vocabulary
  differs from the target's (`verify_equal_vocab_size_if_draft_model`).
- `dflash`: `DFlashProposer` (v1/spec_decode/dflash.py): the base config, non-causal attention.
- `mtp` with a Gemma 4 assistant: `Gemma4Proposer` (v1/spec_decode/gemma4.py); with a Step-3.5
  draft (`step3p5_mtp`): `Step3p5MTPProposer` (v1/spec_decode/step3p5.py, its own head wiring:
  each MTP layer keeps the head it loaded).
- `dspark`: implemented only by vLLM's V2 GPU model runner (0.33.0 config/vllm.py), whose
  `load_dspark_model` (v1/worker/gpu/spec_decode/dspark/utils.py) sets
  `get_draft_quant_config(vllm_config)` on the draft's VllmConfig after its post-init restored
  the target's: for an embedded DSpark drafter a config made from the target's checkpoint and
  quantization method.
Other methods keep the base proposer (construct.find_proposer_class). Each is vLLM's own code,
run on a stand-in proposer that is an instance of the real class (its `super()` calls work).
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

_PROPOSERS = {
    "draft_model": ("vllm.v1.spec_decode.draft_model", "DraftModelProposer"),
    "dflash": ("vllm.v1.spec_decode.dflash", "DFlashProposer"),
}
# SpeculativeConfig predicates the model runner asks, in its order, before the method's own
# proposer (v1/worker/gpu_model_runner.py: use_gemma4_mtp, then use_step3p5_mtp).
_BY_PREDICATE = (
    ("use_gemma4_mtp", ("vllm.v1.spec_decode.gemma4", "Gemma4Proposer")),
    ("use_step3p5_mtp", ("vllm.v1.spec_decode.step3p5", "Step3p5MTPProposer")),
)


def proposer_class(method: str | None, spec_config: Any = None) -> Any:
    """The proposer class vLLM uses for METHOD where it has one of its own; None: the base.
    A Gemma 4 assistant (method mtp, draft type `gemma4_mtp`) gets `Gemma4Proposer`, as the
    model runner picks it (`speculative_config.use_gemma4_mtp()`): its own embedding sharing
    (the target's wider embedding whatever the draft's width) and no head sharing."""
    where = _PROPOSERS.get(method or "")
    for predicate, proposer in _BY_PREDICATE if method == "mtp" else ():
        asks = getattr(spec_config, predicate, None)
        try:
            if callable(asks) and asks():
                where = proposer
                break
        except Exception:
            continue
    if where is None:
        return None
    try:
        return getattr(importlib.import_module(where[0]), where[1], None)
    except Exception:
        return None


def stand_in(cls: Any, fake_cls: Any, **attrs: Any) -> Any:
    """An instance of CLS that has only ATTRS (other attributes read as None, as fake_cls
    answers them), without running the proposer's __init__ (it allocates GPU buffers)."""
    stand_in_cls = type(f"StandIn{cls.__name__}", (fake_cls, cls), {})
    obj: Any = object.__new__(stand_in_cls)
    obj.__dict__.update(attrs)
    return obj


def model_prefix(method: str | None) -> str:
    """The prefix the proposer builds the draft under: a draft model's layers are
    `draft_model.*` (DraftModelProposer._get_model), apart from the target's in the
    forward context; other drafts are built at the root."""
    return "draft_model" if method == "draft_model" else ""


def check(spec_config: Any, base_cls: Any, fake_cls: Any) -> None:
    """What the method's proposer validates when it is created, before any model is built
    (raises vLLM's own error: a config error in the report): a draft model's vocabulary, and
    for parallel drafting (DFlash, DSpark) the token its masked slots are fed
    (`_init_parallel_drafting_params`, which raises when the draft config names none)."""
    method = getattr(spec_config, "method", None)
    if method == "draft_model" and not getattr(spec_config, "use_heterogeneous_vocab", False):
        verify = getattr(spec_config, "verify_equal_vocab_size_if_draft_model", None)
        if callable(verify):
            verify()
    cls = proposer_class(method) or base_cls
    init = getattr(cls, "_init_parallel_drafting_params", None)
    if getattr(spec_config, "parallel_drafting", False) and method == "dflash" and callable(init):
        init(stand_in(cls, fake_cls, draft_model_config=spec_config.draft_model_config))


def draft_vllm_config(vllm_config: Any, spec_config: Any, proposer_config: Any) -> Any:
    """The VllmConfig the draft is built with: the proposer's (construct.draft_config_for),
    with the quant config the release's speculator gives the draft where it sets one."""
    if getattr(spec_config, "method", None) != "dspark":
        return proposer_config
    try:
        from vllm.model_executor.models.utils import get_draft_quant_config
    except ImportError:  # a release without it builds the draft with the target's config
        return proposer_config
    out = copy.copy(proposer_config)
    out.quant_config = get_draft_quant_config(vllm_config)
    return out
