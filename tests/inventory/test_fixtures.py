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
from paths import ROOT

from fixtures import build as B
from fixtures import layouts as L
from fixtures import transforms as T
from fixtures.sparse import DTYPE_BYTES

REPO = ROOT


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


def _header_length(shard: Path) -> int:
    with open(shard, "rb") as f:
        return int.from_bytes(f.read(8), "little")


def _headers(path: Path, files: list[Path] | None = None) -> dict[str, tuple[str, tuple[int, ...]]]:
    from safetensors import safe_open

    out = {}
    for f in files if files is not None else sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as h:
            names = h.keys()  # a safetensors handle, not a dict: `in h` does not list names
            for k in names:
                sl = h.get_slice(k)
                out[k] = (sl.get_dtype(), tuple(sl.get_shape()))
    return out


# ---------------------------------------------------------------------------------------
# every recipe builds, and its files are what the index and manifest say
# ---------------------------------------------------------------------------------------


@pytest.mark.factory
@pytest.mark.parametrize("recipe", B.list_recipes())
def test_recipe_builds_and_headers_parse(recipe):
    path = B.cached_build(recipe)
    m = B.manifest(path)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"]
    # A sidecar file (recipes' [sidecar]) lies outside the index on purpose.
    sidecar = B.load_recipe(recipe).get("sidecar", {}).get("file")
    shards = sorted(p for p in path.glob("*.safetensors") if p.name != sidecar)
    assert len(shards) == m["shards"] == int(B.load_recipe(recipe).get("shards", len(shards)))
    headers = _headers(path)
    assert len(headers) == m["tensors"]
    indexed = _headers(path, shards)
    if len(shards) > 1:
        idx = _index(path)
        assert set(idx["weight_map"]) == set(indexed)
        assert set(idx["weight_map"].values()) == {p.name for p in shards}
        assert idx["metadata"]["total_size"] == sum(DTYPE_BYTES[d] * _prod(s) for d, s in indexed.values())
    logical = sum(DTYPE_BYTES[d] * _prod(s) for d, s in headers.values())
    assert logical == m["logical_bytes"]
    # sparse: the data region is a hole. What is written is metadata: the headers, the index and
    # the small files (Kimi-K3's 497,220 tensors need ~135 MB of them) and a little slack.
    metadata = sum(8 + _header_length(p) for p in path.glob("*.safetensors"))
    metadata += sum(p.stat().st_size for p in path.iterdir() if p.is_file() and p.suffix != ".safetensors")
    assert _du_bytes(path) < metadata + 64 * 2**20
    assert sum(p.stat().st_size for p in path.glob("*.safetensors")) >= logical


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
    out = subprocess.run(
        [sys.executable, "-m", "fixtures", "list"], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "dsv4-flash-w4a16-bf16mtp" in out
    dest = tmp_path / "mimo"
    subprocess.run(
        [sys.executable, "-m", "fixtures", "build", "mimo-bf16", str(dest)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
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
    for leaf in (
        "e_proj.weight",
        "h_proj.weight",
        "enorm.weight",
        "hnorm.weight",
        "norm.weight",
        "hc_head_fn",
        "hc_head_base",
        "hc_head_scale",
        "attn.wq_a.weight",
        "ffn.experts.255.w3.scale",
        "ffn.shared_experts.w2.scale",
    ):
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
    assert (
        cfg["compress_ratios"]
        == json.loads((L.FAMILIES_DIR / "deepseek_v4_flash" / "config.json").read_text())["compress_ratios"]
    )
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


@pytest.mark.slow
def test_dsv4_ondisk_ignore_is_seed_000():
    qc = B.materialize("dsv4-flash-w4a16-ondisk-ignore").config["quantization_config"]
    assert "layers.3.attn.compressor.fused_wkv_wgate" in qc["ignore"]
    assert "layers.3.ffn.shared_experts.w1" in qc["ignore"]
    assert not any(e.startswith("model.") for e in qc["ignore"])


def test_dsv4_no_mtp_keeps_config_depth():
    ck = B.materialize("dsv4-flash-no-mtp")
    assert ck.config["num_nextn_predict_layers"] == 1
    assert not any(n.startswith("mtp.") for n, _, _ in ck.tensors)


@pytest.mark.slow
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
    assert "-:.*mtp.*" in mtp.config["quantization_config"]["dynamic"]


# ---------------------------------------------------------------------------------------
# synthetic transforms vs real compressed-tensors output
# ---------------------------------------------------------------------------------------


def _tiny_bf16_layout(hidden=128, inter=256, vocab=512, n_experts=2):
    import torch

    from fixtures.real_ct import TinyModel

    m = TinyModel(hidden, inter, vocab, 1, n_experts).to(torch.bfloat16)
    return [(k, "BF16", tuple(v.shape)) for k, v in m.state_dict().items()]


@pytest.mark.factory
@pytest.mark.parametrize(
    "scheme", ["w4a16", "w4a16_asym", "w8a16", "w8a8", "fp8", "fp8_dynamic", "fp8_block", "nvfp4", "nvfp4a16", "mxfp4"]
)
def test_transform_matches_real_compressed_tensors(scheme, tmp_path):
    from fixtures.real_ct import SCHEMES, make_real_ct_checkpoint, read_header

    preset, fmt = SCHEMES[scheme]
    real_dir = make_real_ct_checkpoint(tmp_path / scheme, scheme, hidden=128, inter=256)
    real = read_header(real_dir / "model.safetensors")
    real_qc = json.loads((real_dir / "config.json").read_text())["quantization_config"]

    ck = T.Checkpoint("tiny", {"architectures": ["TinyForCausalLM"]}, _tiny_bf16_layout())
    ck = T.compressed_tensors(
        ck,
        groups=[
            {
                "scheme": preset,
                "targets": ["Linear"],
                "disk_targets": [r"re:^model\.layers\.\d+\.(self_attn|mlp\.experts\.\d+)\.\w+_proj$"],
            }
        ],
        ignore_from_model=True,
    )
    synth = {n: (d, tuple(s)) for n, d, s in ck.tensors}

    assert set(synth) == set(real), sorted(set(synth) ^ set(real))
    for name in real:
        assert synth[name] == real[name], name
    sq = ck.config["quantization_config"]
    assert sq["config_groups"]["group_0"]["format"] == fmt
    assert sq == real_qc


def test_ct_leaf_rules_are_shape_rules():
    """Leaf rules generalize: DSV4-size modules get the same suffixes with scaled shapes."""
    s = T.ct_scheme("W4A16", ["Linear"])
    assert T.ct_leaves("x", "BF16", (2048, 4096), s) == [
        ("x.weight_packed", "I32", (2048, 512)),
        ("x.weight_scale", "BF16", (2048, 32)),
        ("x.weight_shape", "I64", (2,)),
    ]
    s = T.ct_scheme("NVFP4", ["Linear"])
    assert T.ct_leaves("x", "BF16", (4096, 8192), s) == [
        ("x.weight_packed", "U8", (4096, 4096)),
        ("x.weight_scale", "F8_E4M3", (4096, 512)),
        ("x.weight_global_scale", "F32", (1,)),
        ("x.input_global_scale", "F32", (1,)),
    ]


def test_fp8_block_and_gptq_and_modelopt_rules():
    ck = T.Checkpoint("x", {}, [("m.a.weight", "BF16", (300, 1000)), ("m.n.weight", "BF16", (1000,))])
    f = T.fp8_block(ck, ["re:.*a$"])
    assert f.tensors[:2] == [("m.a.weight", "F8_E4M3", (300, 1000)), ("m.a.weight_scale_inv", "F32", (3, 8))]
    ck = T.Checkpoint("x", {}, [("m.a.weight", "BF16", (512, 1024))])
    g = T.gptq(ck, ["m.a"])
    assert {n: (d, s) for n, d, s in g.tensors} == {
        "m.a.qweight": ("I32", (128, 512)),
        "m.a.qzeros": ("I32", (8, 64)),
        "m.a.scales": ("F16", (8, 512)),
        "m.a.g_idx": ("I32", (1024,)),
    }
    mo = T.modelopt_nvfp4(ck, ["m.a"], exclude_modules=["lm_head"])
    assert {n: (d, s) for n, d, s in mo.tensors} == {
        "m.a.weight": ("U8", (512, 512)),
        "m.a.weight_scale": ("F8_E4M3", (512, 64)),
        "m.a.weight_scale_2": ("F32", ()),
        "m.a.input_scale": ("F32", ()),
    }
    assert mo.hf_quant_config["quantization"]["quant_algo"] == "NVFP4"


# ---------------------------------------------------------------------------------------
# ModelOpt NVFP4: exclude_from_model and the DeepSeek-V4 "dsv4_experts" form
# ---------------------------------------------------------------------------------------


def _nvfp4_synthetic() -> T.Checkpoint:
    """Every kind of 2-D ``.weight`` modelopt_nvfp4 meets: embeddings, targeted BF16,
    targeted-but-skipped BF16, untargeted BF16, native FP8, native packed-FP4 experts
    (targeted and skipped), plus 1-D norms that are no Linear."""
    return T.Checkpoint(
        "x",
        {"architectures": ["X"]},
        [
            ("model.embed_tokens.weight", "BF16", (512, 128)),
            ("embed.weight", "BF16", (512, 128)),
            ("model.layers.0.input_layernorm.weight", "BF16", (128,)),
            ("model.layers.0.self_attn.q_proj.weight", "BF16", (128, 128)),
            ("model.layers.0.self_attn.k_proj.weight", "BF16", (64, 128)),
            ("model.layers.0.self_attn.o_proj.weight", "F8_E4M3", (128, 128)),
            ("model.layers.0.self_attn.o_proj.weight_scale_inv", "F32", (1, 1)),
            ("model.layers.0.mlp.gate.weight", "BF16", (4, 128)),
            ("model.layers.0.mlp.experts.0.w1.weight", "I8", (256, 64)),
            ("model.layers.0.mlp.experts.0.w1.scale", "F8_E8M0", (256, 4)),
            ("mtp.0.experts.0.w1.weight", "I8", (256, 64)),
            ("mtp.0.experts.0.w1.scale", "F8_E8M0", (256, 4)),
            ("lm_head.weight", "BF16", (512, 128)),
        ],
    )


_SYN_TARGETS = [r"re:.*\.(q_proj|k_proj|w1)$"]
_SYN_SKIP = [r"re:.*\.k_proj$", r"re:^mtp\."]
_SYN_QUANTIZED = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.experts.0.w1"}
_SYN_UNQUANTIZED = {
    "model.layers.0.self_attn.k_proj",  # targeted, skipped
    "model.layers.0.self_attn.o_proj",  # native FP8, not a 16-bit source
    "model.layers.0.mlp.gate",  # not targeted
    "mtp.0.experts.0.w1",  # packed FP4, skipped
    "lm_head",
}


def _exclusions(ck: T.Checkpoint) -> tuple[list[str], list[str]]:
    return ck.config["quantization_config"]["ignore"], ck.hf_quant_config["quantization"]["exclude_modules"]


@pytest.mark.parametrize("form", ["both", "dsv4_experts"])
def test_modelopt_exclude_from_model_lists_every_unquantized_linear(form):
    explicit = ["lm_head", "mtp.*"]
    ck = T.modelopt_nvfp4(
        _nvfp4_synthetic(),
        _SYN_TARGETS,
        exclude_modules=list(explicit),
        skip=_SYN_SKIP,
        form=form,
        exclude_from_model=True,
    )
    ignore, exclude = _exclusions(ck)
    assert ignore == exclude
    assert exclude[: len(explicit)] == explicit  # explicit entries first, as given
    assert len(exclude) == len(set(exclude))  # lm_head (explicit and unquantized) once
    assert set(exclude) == set(explicit) | _SYN_UNQUANTIZED
    assert not set(exclude) & _SYN_QUANTIZED
    assert not {"model.embed_tokens", "embed"} & set(exclude)
    assert not any(e.endswith("layernorm") for e in exclude)
    # the tensors agree with the list: quantized modules carry NVFP4 leaves, the rest not
    h = {n: (d, tuple(s)) for n, d, s in ck.tensors}
    for mod in _SYN_QUANTIZED:
        assert h[f"{mod}.weight"][0] == "U8" and f"{mod}.weight_scale_2" in h
    for mod in _SYN_UNQUANTIZED:
        assert h[f"{mod}.weight"][0] != "U8" and f"{mod}.weight_scale_2" not in h


@pytest.mark.parametrize("form", ["both", "dsv4_experts"])
def test_modelopt_exclusions_are_the_explicit_entries_without_exclude_from_model(form):
    explicit = ["lm_head", "model.layers.0.self_attn.k_proj*"]
    for kw in ({}, {"exclude_from_model": False}):
        ck = T.modelopt_nvfp4(
            _nvfp4_synthetic(), _SYN_TARGETS, exclude_modules=list(explicit), skip=_SYN_SKIP, form=form, **kw
        )
        assert _exclusions(ck) == (explicit, explicit)


def test_modelopt_nvfp4_converts_native_packed_fp4_and_drops_scale():
    ck = T.modelopt_nvfp4(_nvfp4_synthetic(), _SYN_TARGETS, exclude_modules=[], skip=_SYN_SKIP, form="dsv4_experts")
    h = {n: (d, tuple(s)) for n, d, s in ck.tensors}
    e = "model.layers.0.mlp.experts.0.w1"  # I8 [256, 64] = logical [256, 128]
    assert {k: v for k, v in h.items() if k.startswith(e + ".")} == {
        f"{e}.weight": ("U8", (256, 64)),
        f"{e}.weight_scale": ("F8_E4M3", (256, 8)),
        f"{e}.weight_scale_2": ("F32", ()),
        f"{e}.input_scale": ("F32", ()),
    }
    # the skipped packed-FP4 module keeps its native leaves
    assert h["mtp.0.experts.0.w1.weight"] == ("I8", (256, 64))
    assert h["mtp.0.experts.0.w1.scale"] == ("F8_E8M0", (256, 4))
    layers = ck.hf_quant_config["quantization"]["quantized_layers"]
    assert layers["model.layers.0.mlp.experts"] == {"quant_algo": "NVFP4", "group_size": 16}
    assert not any(k.startswith("mtp.") for k in layers)


@pytest.mark.slow
def test_glm_nvfp4_recipes_exclusions_are_exactly_the_recipe_entries():
    for name in ("glm45-air-nvfp4-clean", "glm45-air-nvfp4-eh-proj-quantized", "glm45-air-nvfp4-partial-qkv-exclude"):
        r = B.load_recipe(name)
        (step,) = r["transforms"]
        assert not step.get("exclude_from_model") and step["form"] == "both"
        ck = B.materialize(r)
        assert _exclusions(ck) == (step["exclude_modules"], step["exclude_modules"]), name
        assert ck.config["quantization_config"]["quant_method"] == "modelopt"
        assert ck.hf_quant_config["producer"]["version"] == T.MODELOPT_VERSION


_DSV4_EXPERT_RX = re.compile(r"^layers\.\d+\.ffn\.experts\.\d+\.w[123]\.")
_DSV4_LAYERS = 43


def _raw_header(f: Path) -> bytes:
    with open(f, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        return fh.read(n)


@pytest.mark.parametrize("recipe", ["dsv4-flash-nvfp4", "dsv4-flash-nvfp4-mtp-leaf-excludes"])
def test_dsv4_nvfp4_config_json_and_hf_quant_config_agree(recipe):
    path = B.cached_build(recipe)
    cfg = json.loads((path / "config.json").read_text())
    qc = cfg["quantization_config"]
    hf = json.loads((path / "hf_quant_config.json").read_text())
    hq = hf["quantization"]
    # NVIDIA's layout: the native FP8 config stays, NVFP4 is the MoE algorithm
    native = json.loads((L.FAMILIES_DIR / "deepseek_v4_flash" / "config.json").read_text())
    assert qc["quant_method"] == "fp8" and qc["moe_quant_algo"] == "NVFP4"
    assert qc["quant_algo"] == hq["quant_algo"] == "MIXED_PRECISION"
    for k, v in native["quantization_config"].items():
        assert qc[k] == v, k
    # ... and config.json repeats what hf_quant_config.json says
    assert qc["producer"] == hf["producer"] == {"name": "modelopt", "version": T.DSV4_NVFP4_PRODUCER_VERSION}
    assert qc["group_size"] == hq["group_size"] == 16
    assert qc["kv_cache_quant_algo"] == hq["kv_cache_quant_algo"]
    assert qc["ignore"] == hq["exclude_modules"]
    assert (
        qc["quantized_layers"]
        == hq["quantized_layers"]
        == {f"layers.{i}.ffn.experts": {"quant_algo": "NVFP4", "group_size": 16} for i in range(_DSV4_LAYERS)}
    )
    g = qc["config_groups"]["group_0"]
    assert g["weights"]["num_bits"] == g["input_activations"]["num_bits"] == 4
    assert g["weights"]["group_size"] == 16
    # everything but quantization_config is the upstream config
    assert {k: v for k, v in cfg.items() if k != "quantization_config"} == {
        k: v for k, v in native.items() if k != "quantization_config"
    }


@pytest.mark.slow
def test_dsv4_nvfp4_converts_trunk_experts_and_leaves_the_rest_untouched():
    base_path = B.cached_build("dsv4-flash-official")
    path = B.cached_build("dsv4-flash-nvfp4")
    base, h = _headers(base_path), _headers(path)
    experts = {n.rsplit(".", 1)[0] for n in base if _DSV4_EXPERT_RX.match(n)}
    assert len(experts) == _DSV4_LAYERS * 256 * 3
    for mod in experts:
        o, ip = base[f"{mod}.weight"][1]  # I8 [out, in/2]
        assert base[f"{mod}.weight"][0] == "I8"
        w, ws = h[f"{mod}.weight"], h[f"{mod}.weight_scale"]
        assert w == ("U8", (o, ip)), mod
        assert ws[0] == "F8_E4M3" and ws[1] == (o, 2 * ip // 16), mod  # one per 16 inputs
        assert h[f"{mod}.weight_scale_2"] == ("F32", ()), mod
        assert h[f"{mod}.input_scale"] == ("F32", ()), mod
        assert f"{mod}.scale" not in h, mod
    assert h["layers.3.ffn.experts.0.w1.weight_scale"] == ("F8_E4M3", (2048, 256))
    assert h["layers.3.ffn.experts.0.w2.weight_scale"] == ("F8_E4M3", (4096, 128))
    # every other tensor (attention, shared experts, router, head, embed, mtp.0.*) as published
    rest = {n: v for n, v in h.items() if not _DSV4_EXPERT_RX.match(n)}
    assert rest == {n: v for n, v in base.items() if not _DSV4_EXPERT_RX.match(n)}
    assert h["layers.3.attn.wq_a.weight"] == base["layers.3.attn.wq_a.weight"] == ("F8_E4M3", (1024, 4096))
    assert "layers.3.attn.wq_a.scale" in h
    assert h["mtp.0.ffn.experts.0.w1.weight"] == ("I8", (2048, 2048))
    assert h["mtp.0.ffn.experts.0.w1.scale"] == ("F8_E8M0", (2048, 128))
    assert not any(n.startswith("mtp.") and n.endswith((".weight_scale_2", ".input_scale")) for n in h)
    # the mtp.0 shard is the published one, header byte for byte
    last = "model-00046-of-00046.safetensors"
    assert _index(path)["weight_map"]["mtp.0.e_proj.weight"] == last
    assert _raw_header(path / last) == _raw_header(base_path / last)
    assert (path / last).stat().st_size == (base_path / last).stat().st_size


@pytest.mark.slow
def test_dsv4_nvfp4_leaf_excludes_lists_every_unquantized_linear():
    path = B.cached_build("dsv4-flash-nvfp4-mtp-leaf-excludes")
    h = _headers(path)
    ignore = json.loads((path / "config.json").read_text())["quantization_config"]["ignore"]
    assert len(ignore) == len(set(ignore)) == 1333
    linears = {n[: -len(".weight")] for n, (_, s) in h.items() if n.endswith(".weight") and len(s) == 2}
    nvfp4 = {m for m in linears if f"{m}.weight_scale_2" in h}
    assert len(nvfp4) == _DSV4_LAYERS * 256 * 3
    assert set(ignore) == linears - nvfp4 - {"embed"}
    assert "head" in ignore and "mtp.0.e_proj" in ignore and "embed" not in ignore
    assert {f"mtp.0.ffn.experts.{e}.w{k}" for e in range(256) for k in (1, 2, 3)} <= set(ignore)
    # same tensors as the glob-excluded release: only the exclusion list differs
    assert h == _headers(B.cached_build("dsv4-flash-nvfp4"))
