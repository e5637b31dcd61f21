"""The fixture factory: recipes build, layouts match the public checkpoints, and the
synthetic quantization transforms reproduce what compressed-tensors really writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import build as B
from fixtures import layouts as L
from fixtures import transforms as T
from fixtures.sparse import DTYPE_BYTES

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _fixture_cache(tmp_path_factory):
    if not os.environ.get("MTPLINT_FIXTURE_CACHE"):
        os.environ["MTPLINT_FIXTURE_CACHE"] = str(tmp_path_factory.mktemp("fixture-cache"))
    yield


def _index(path: Path) -> dict:
    return json.loads((path / "model.safetensors.index.json").read_text())


def _du_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 1024


def _headers(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    from safetensors import safe_open

    out = {}
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as h:
            for k in h.keys():
                sl = h.get_slice(k)
                out[k] = (sl.get_dtype(), tuple(sl.get_shape()))
    return out


# ---------------------------------------------------------------------------------------
# every recipe builds, and its files are what the index and manifest say
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", B.list_recipes())
def test_recipe_builds_and_headers_parse(recipe):
    path = B.cached_build(recipe)
    m = B.manifest(path)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"]
    shards = sorted(path.glob("*.safetensors"))
    assert len(shards) == m["shards"] == int(B.load_recipe(recipe).get("shards", len(shards)))
    headers = _headers(path)
    assert len(headers) == m["tensors"]
    if len(shards) > 1:
        idx = _index(path)
        assert set(idx["weight_map"]) == set(headers)
        assert set(idx["weight_map"].values()) == {p.name for p in shards}
        assert idx["metadata"]["total_size"] == m["logical_bytes"]
    logical = sum(DTYPE_BYTES[d] * _prod(s) for d, s in headers.values())
    assert logical == m["logical_bytes"]
    # sparse: the data region is a hole
    assert _du_bytes(path) < 64 * 2**20
    assert sum(p.stat().st_size for p in shards) >= logical


def _prod(shape) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def test_recipes_have_descriptions_and_known_families():
    for name in B.list_recipes():
        r = B.load_recipe(name)
        assert r["family"] in L.LAYOUTS, name
        assert r.get("description"), name


def test_cached_build_reuses_directory():
    a = B.cached_build("mimo-bf16")
    b = B.cached_build("mimo-bf16")
    assert a == b and a.name.startswith("mimo-bf16-")


def test_cli_list_and_build(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "fixtures", "list"], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "dsv4-flash-w4a16-bf16mtp" in out
    dest = tmp_path / "mimo"
    subprocess.run([sys.executable, "-m", "fixtures", "build", "mimo-bf16", str(dest)], cwd=REPO,
                   env=env, capture_output=True, text=True, check=True)
    assert (dest / "config.json").exists() and len(list(dest.glob("*.safetensors"))) == 4


# ---------------------------------------------------------------------------------------
# DeepSeek-V4-Flash: the public layout
# ---------------------------------------------------------------------------------------

def test_dsv4_flash_official_is_full_size_and_tiny_on_disk():
    path = B.cached_build("dsv4-flash-official")
    idx = _index(path)
    wm = idx["weight_map"]
    assert len(wm) == 69187
    shards = sorted(path.glob("model-*-of-00046.safetensors"))
    assert len(shards) == 46
    total = idx["metadata"]["total_size"]
    assert total == 159_609_485_896  # ~159.6 GB logical
    assert sum(p.stat().st_size for p in shards) > 159e9
    assert _du_bytes(path) < 32 * 2**20  # headers only
    # one shard per unit: embed | layers.0..42 | head+norm+hc_head | mtp.0
    assert wm["embed.weight"] == "model-00001-of-00046.safetensors"
    assert wm["layers.42.attn.wq_a.weight"] == "model-00044-of-00046.safetensors"
    assert wm["head.weight"] == "model-00045-of-00046.safetensors"
    assert wm["mtp.0.e_proj.weight"] == "model-00046-of-00046.safetensors"
    # config is the upstream file verbatim
    assert (path / "config.json").read_text() == (L.FAMILIES_DIR / "deepseek_v4_flash" / "config.json").read_text()


def test_dsv4_flash_tensor_fingerprints():
    h = _headers(B.cached_build("dsv4-flash-official"))
    assert h["mtp.0.e_proj.weight"] == ("F8_E4M3", (4096, 4096))
    assert h["mtp.0.e_proj.scale"] == ("F8_E8M0", (32, 32))
    assert h["layers.3.ffn.experts.0.w1.weight"] == ("I8", (2048, 2048))
    assert h["layers.3.ffn.experts.0.w1.scale"] == ("F8_E8M0", (2048, 128))
    assert h["layers.3.ffn.experts.0.w2.weight"] == ("I8", (4096, 1024))
    assert h["layers.0.ffn.gate.tid2eid"] == ("I64", (129280, 6))
    assert h["layers.3.ffn.gate.bias"] == ("F32", (256,))
    assert h["layers.2.attn.compressor.ape"] == ("F32", (4, 1024))
    assert h["layers.3.attn.compressor.wkv.weight"] == ("BF16", (512, 4096))
    assert h["layers.2.attn.indexer.wq_b.scale"] == ("F8_E8M0", (64, 8))
    assert h["layers.0.hc_attn_fn"] == ("F32", (24, 16384))
    assert h["mtp.0.hc_head_fn"] == ("F32", (4, 16384))
    assert "layers.0.attn.compressor.ape" not in h  # sliding-window layer
    assert not any(k.startswith("mtp.0.attn.compressor") for k in h)  # MTP: ratio 1
    mtp = [k for k in h if k.startswith("mtp.")]
    assert len(mtp) == 1575
    for leaf in ("e_proj.weight", "h_proj.weight", "enorm.weight", "hnorm.weight", "norm.weight",
                 "hc_head_fn", "hc_head_base", "hc_head_scale", "attn.wq_a.weight",
                 "ffn.experts.255.w3.scale", "ffn.shared_experts.w2.scale"):
        assert f"mtp.0.{leaf}" in h
    assert "embed.weight" in h and "head.weight" in h
    assert "mtp.0.head.weight" not in h and "mtp.0.emb.tok_emb.weight" not in h


def test_dsv4_dspark_matches_public_0731_index():
    # deepseek-ai/DeepSeek-V4-Flash-0731: 72,317 tensors, 166,878,536,440 bytes, 48 shards
    ck = B.materialize("dsv4-flash-dspark-as-mtp")
    assert len(ck.tensors) == 72317
    assert L.logical_size(ck.tensors) == 166_878_536_440
    groups = L.shard_groups("deepseek_v4_flash", ck.tensors, 48)
    assert [len(g) for g in groups[-4:]] == [5, 1568, 1565, 1572]


def test_dsv4_w4a16_bf16mtp_is_seed_001():
    path = B.cached_build("dsv4-flash-w4a16-bf16mtp")
    cfg = json.loads((path / "config.json").read_text())
    qc = cfg["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "mixed-precision"
    assert qc["config_groups"]["group_0"]["format"] == "pack-quantized"
    assert qc["config_groups"]["group_1"]["format"] == "float-quantized"
    assert "re:.*mtp.*" in qc["ignore"]
    assert "model.layers.3.attn.compressor.fused_wkv_wgate" in qc["ignore"]
    assert "lm_head" in qc["ignore"]
    assert cfg["compress_ratios"] == json.loads(
        (L.FAMILIES_DIR / "deepseek_v4_flash" / "config.json").read_text())["compress_ratios"]
    h = _headers(path)
    assert h["layers.3.ffn.experts.0.w1.weight_packed"] == ("I32", (2048, 512))
    assert h["layers.3.ffn.experts.0.w1.weight_scale"] == ("BF16", (2048, 32))
    assert h["layers.3.ffn.experts.0.w1.weight_shape"] == ("I64", (2,))
    assert h["layers.3.attn.wq_a.weight"] == ("F8_E4M3", (1024, 4096))
    assert h["layers.3.attn.wq_a.weight_scale"] == ("BF16", (8, 32))
    # the MTP block is BF16, unscaled
    assert h["mtp.0.ffn.experts.0.w1.weight"] == ("BF16", (2048, 4096))
    assert h["mtp.0.attn.wq_a.weight"] == ("BF16", (1024, 4096))
    assert not any(k.startswith("mtp.") and re.search(r"\.(scale|weight_scale\w*|weight_packed)$", k) for k in h)
    # the ignore regex does not match the draft's runtime prefix (the bug)
    assert not T.matches("model.layers.43.ffn.experts.0.w1", qc["ignore"])
    assert T.matches("model.layers.43.ffn.experts.0.w1", qc["config_groups"]["group_0"]["targets"])


def test_dsv4_ondisk_ignore_is_seed_000():
    qc = B.materialize("dsv4-flash-w4a16-ondisk-ignore").config["quantization_config"]
    assert "layers.3.attn.compressor.fused_wkv_wgate" in qc["ignore"]
    assert "layers.3.ffn.shared_experts.w1" in qc["ignore"]
    assert not any(e.startswith("model.") for e in qc["ignore"])


def test_dsv4_no_mtp_keeps_config_depth():
    ck = B.materialize("dsv4-flash-no-mtp")
    assert ck.config["num_nextn_predict_layers"] == 1
    assert not any(n.startswith("mtp.") for n, _, _ in ck.tensors)


def test_other_family_counts():
    assert len(B.materialize("dsv3-fp8-official").tensors) == 91991
    h = dict((n, (d, tuple(s))) for n, d, s in B.materialize("dsv3-fp8-official").tensors)
    assert h["model.layers.61.eh_proj.weight"] == ("BF16", (7168, 14336))
    assert h["model.layers.61.mlp.experts.0.gate_proj.weight_scale_inv"] == ("F32", (16, 56))
    glm = dict((n, (d, tuple(s))) for n, d, s in B.materialize("glm45-air-nvfp4-eh-proj-quantized").tensors)
    assert glm["model.layers.46.eh_proj.weight"] == ("U8", (4096, 4096))
    assert glm["model.layers.46.eh_proj.weight_scale"] == ("F8_E4M3", (4096, 512))
    clean = B.materialize("glm45-air-nvfp4-clean")
    assert clean.hf_quant_config["quantization"]["exclude_modules"] == ["lm_head", "model.layers.46*"]
    assert dict((n, d) for n, d, _ in clean.tensors)["model.layers.46.eh_proj.weight"] == "BF16"
    q35 = B.materialize("qwen35-moe-gptq-no-mtp")
    assert not any(n.startswith("mtp.") for n, _, _ in q35.tensors)
    assert q35.config["text_config"]["mtp_num_hidden_layers"] == 1
    mtp = B.materialize("qwen35-moe-gptq-mtp")
    names = {n for n, _, _ in mtp.tensors}
    assert "mtp.fc.weight" in names and "mtp.layers.0.mlp.experts.0.gate_proj.weight" in names
    assert "model.language_model.layers.0.mlp.experts.3.down_proj.qweight" in names
    assert mtp.config["quantization_config"]["dynamic"] == {"-:.*visual.*": {}, "-:.*mtp.*": {}}


# ---------------------------------------------------------------------------------------
# synthetic transforms vs real compressed-tensors output
# ---------------------------------------------------------------------------------------

def _tiny_bf16_layout(hidden=128, inter=256, vocab=512, n_experts=2):
    import torch

    from fixtures.real_ct import TinyModel

    m = TinyModel(hidden, inter, vocab, 1, n_experts).to(torch.bfloat16)
    return [(k, "BF16", tuple(v.shape)) for k, v in m.state_dict().items()]


@pytest.mark.parametrize("scheme", ["w4a16", "w4a16_asym", "w8a16", "w8a8", "fp8", "fp8_dynamic",
                                    "fp8_block", "nvfp4", "nvfp4a16", "mxfp4"])
def test_transform_matches_real_compressed_tensors(scheme, tmp_path):
    from fixtures.real_ct import SCHEMES, make_real_ct_checkpoint, read_header

    preset, fmt = SCHEMES[scheme]
    real_dir = make_real_ct_checkpoint(tmp_path / scheme, scheme, hidden=128, inter=256)
    real = read_header(real_dir / "model.safetensors")
    real_qc = json.loads((real_dir / "config.json").read_text())["quantization_config"]

    ck = T.Checkpoint("tiny", {"architectures": ["TinyForCausalLM"]}, _tiny_bf16_layout())
    ck = T.compressed_tensors(
        ck, groups=[{"scheme": preset, "targets": ["Linear"],
                     "disk_targets": [r"re:^model\.layers\.\d+\.(self_attn|mlp\.experts\.\d+)\.\w+_proj$"]}],
        ignore_from_model=True)
    synth = {n: (d, tuple(s)) for n, d, s in ck.tensors}

    assert set(synth) == set(real), (sorted(set(synth) ^ set(real)))
    for name in real:
        assert synth[name] == real[name], name
    sq = ck.config["quantization_config"]
    assert sq["config_groups"]["group_0"]["format"] == fmt
    assert sq == real_qc


def test_ct_leaf_rules_are_shape_rules():
    """Leaf rules generalize: DSV4-size modules get the same suffixes with scaled shapes."""
    s = T.ct_scheme("W4A16", ["Linear"])
    assert T.ct_leaves("x", "BF16", (2048, 4096), s) == [
        ("x.weight_packed", "I32", (2048, 512)), ("x.weight_scale", "BF16", (2048, 32)),
        ("x.weight_shape", "I64", (2,))]
    s = T.ct_scheme("NVFP4", ["Linear"])
    assert T.ct_leaves("x", "BF16", (4096, 8192), s) == [
        ("x.weight_packed", "U8", (4096, 4096)), ("x.weight_scale", "F8_E4M3", (4096, 512)),
        ("x.weight_global_scale", "F32", (1,)), ("x.input_global_scale", "F32", (1,))]


def test_fp8_block_and_gptq_and_modelopt_rules():
    ck = T.Checkpoint("x", {}, [("m.a.weight", "BF16", (300, 1000)), ("m.n.weight", "BF16", (1000,))])
    f = T.fp8_block(ck, ["re:.*a$"])
    assert f.tensors[:2] == [("m.a.weight", "F8_E4M3", (300, 1000)), ("m.a.weight_scale_inv", "F32", (3, 8))]
    ck = T.Checkpoint("x", {}, [("m.a.weight", "BF16", (512, 1024))])
    g = T.gptq(ck, ["m.a"])
    assert {n: (d, s) for n, d, s in g.tensors} == {
        "m.a.qweight": ("I32", (128, 512)), "m.a.qzeros": ("I32", (8, 64)),
        "m.a.scales": ("F16", (8, 512)), "m.a.g_idx": ("I32", (1024,))}
    mo = T.modelopt_nvfp4(ck, ["m.a"], exclude_modules=["lm_head"])
    assert {n: (d, s) for n, d, s in mo.tensors} == {
        "m.a.weight": ("U8", (512, 512)), "m.a.weight_scale": ("F8_E4M3", (512, 64)),
        "m.a.weight_scale_2": ("F32", ()), "m.a.input_scale": ("F32", ())}
    assert mo.hf_quant_config["quantization"]["quant_algo"] == "NVFP4"
