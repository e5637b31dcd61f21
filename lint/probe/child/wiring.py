"""Replay the post-load wiring vLLM's speculative proposer performs for an MTP draft.

After loading, the proposer replaces the draft's embedding, lm_head and (since 0.26)
each MTP layer's shared_head.head with the target's modules, and shares buffers such as
topk_indices_buffer. Which parameters end up shared decides whether a never-loaded draft
parameter is harmless or a 0%-acceptance bug, so the probe runs vLLM's own helpers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..report import Wiring, WiringError
from .construct import _FakeProposer, find_proposer_class
from .frames import error_record


def replay(draft: Any, target: Any, vllm_config: Any, spec_config: Any) -> Wiring:
    from . import speculators

    own = speculators.proposer_class(getattr(spec_config, "method", None), spec_config)
    proposer_cls = own or find_proposer_class()
    if proposer_cls is None:
        return Wiring(
            proposer=None, errors=[WiringError(type="NotFound", message="no speculative proposer class found")]
        )
    report = Wiring(proposer=f"{proposer_cls.__module__}.{proposer_cls.__qualname__}")
    attrs = {
        "model": draft,
        "vllm_config": vllm_config,
        "speculative_config": spec_config,
        "draft_model_config": spec_config.draft_model_config,
    }
    fake = speculators.stand_in(own, _FakeProposer, **attrs) if own else _FakeProposer(**attrs)
    target_lm = target
    get_language_model = getattr(target, "get_language_model", None)
    if callable(get_language_model):
        try:
            target_lm = get_language_model()
        except Exception:
            target_lm = target
    for step in ("_maybe_share_embeddings", "_maybe_share_lm_head"):
        fn = getattr(proposer_cls, step, None)
        if fn is None:
            continue
        try:
            with _values_compare_unequal_on_meta():
                fn(fake, target_lm)
            report.steps.append(step)
        except Exception as exc:
            # Steps past what a meta model can answer (e.g. multimodal bookkeeping)
            # are reported, not fatal: sharing already done stays done.
            report.errors.append(error_record(exc, WiringError, step=step))
    target_ids = {id(p): name for name, p in target.named_parameters(remove_duplicate=False)}
    report.draft_params_after = []
    for name, p in fake.model.named_parameters(remove_duplicate=False):
        report.draft_params_after.append(name)
        if id(p) in target_ids:
            report.shared[name] = target_ids[id(p)]
    return report


@contextlib.contextmanager
def _values_compare_unequal_on_meta() -> Iterator[None]:
    """EAGLE drafts with their own head share the target's only when the two hold equal values
    (`torch.equal(target.lm_head.weight.cpu(), draft.lm_head.weight.cpu())`); meta tensors have
    none, so they compare unequal and the draft keeps the head it loaded: initialized either
    way, and with the same values when they are equal."""
    import torch

    equal, cpu = torch.equal, torch.Tensor.cpu

    def meta_equal(a: Any, b: Any) -> bool:
        if getattr(a, "is_meta", False) or getattr(b, "is_meta", False):
            return False
        return bool(equal(a, b))

    def meta_cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self if self.is_meta else cpu(self, *args, **kwargs)

    torch.equal = meta_equal  # type: ignore[assignment]
    torch.Tensor.cpu = meta_cpu  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.equal = equal
        torch.Tensor.cpu = cpu  # type: ignore[method-assign]
