"""The target loads with its config as it was before the draft was built (load_order.py): vLLM
loads the target first, and a draft constructor may write to the config both share
(LongCatFlashMTP sets n_routed_experts = None). Case longcat-flash-bf16-official is the probe-level
proof; this pins the mechanism without vLLM."""

from types import SimpleNamespace

from mtplint.probe.child.load_order import TargetConfigState


class _Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _vllm_config(hf, text=None):
    return SimpleNamespace(model_config=SimpleNamespace(hf_config=hf, hf_text_config=text or hf))


def test_target_load_sees_the_config_before_the_draft_edit_and_the_draft_keeps_its_edit():
    hf = _Config(n_routed_experts=512, model_type="longcat_flash")
    state = TargetConfigState(_vllm_config(hf))
    hf.n_routed_experts = None  # what LongCatFlashMTP.__init__ does to the shared config
    hf.added_by_draft = True
    with state.as_before_draft():
        assert hf.n_routed_experts == 512
        assert not hasattr(hf, "added_by_draft")
    assert hf.n_routed_experts is None
    assert hf.added_by_draft is True


def test_separate_text_config_is_restored_too():
    text = _Config(n_routed_experts=8)
    hf = _Config(text_config=text)
    state = TargetConfigState(_vllm_config(hf, text))
    text.n_routed_experts = None
    with state.as_before_draft():
        assert text.n_routed_experts == 8
    assert text.n_routed_experts is None


def test_untouched_configs_are_left_alone():
    hf = _Config(a=1)
    state = TargetConfigState(_vllm_config(hf))
    before = hf.__dict__
    with state.as_before_draft():
        assert hf.__dict__ is before and hf.a == 1
