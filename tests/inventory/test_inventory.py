"""Inventory: safetensors header reader, checkpoint loader, declared quant config, fingerprints.

Happy paths use files written by the real safetensors library; bad inputs are hand-crafted
and, where safetensors itself has an opinion, checked against it too.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest
import torch
from paths import ROOT
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, str(ROOT))  # fixtures/ lives at the repo root

import compressed_tensors
from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme
from mtplint.core.errors import BadInput
from mtplint.inventory.checkpoint import layout_digest, load_inventory
from mtplint.inventory.declared import parse_declared
from mtplint.inventory.fingerprint import (
    KINDS,
    classify_module,
    fingerprint_modules,
    is_quantized_tensor_name,
    split_module,
)
from mtplint.inventory.model import TensorInfo
from mtplint.inventory.safetensors_header import MAX_HEADER_BYTES, read_header, read_shard_header

from fixtures.sparse import write_sharded, write_sparse

# ---------------------------------------------------------------------------------------------
# helpers


def raw_file(
    path: Path,
    header: object = None,
    *,
    raw: bytes | None = None,
    data: int = 0,
    length: int | None = None,
    tail: bytes = b"",
) -> Path:
    """A hand-made safetensors file: 8-byte length, header bytes, `data` zero bytes, then `tail`."""
    body = raw if raw is not None else json.dumps(header).encode()
    n = len(body) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + body + b"\0" * data + tail)
    return path


def entry(dtype: str, shape: list, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def safetensors_rejects(path: Path) -> bool:
    try:
        with safe_open(str(path), "pt") as f:
            list(f.keys())
    except Exception:
        return True
    return False


def make_checkpoint(
    root: Path,
    shards: dict[str, dict[str, torch.Tensor]],
    config: dict | None = None,
    index: bool | None = None,
    hf_quant: dict | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config if config is not None else {"model_type": "llama"}))
    if hf_quant is not None:
        (root / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    weight_map = {}
    for fname, tensors in shards.items():
        save_file(tensors, str(root / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in tensors})
    if index if index is not None else len(shards) > 1:
        (root / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=2)
        )
    return root


def llm_compressor_config(preset: str, fmt: str, ignore: list[str]) -> dict:
    """The quantization_config dict llm-compressor writes (ModelCompressor.update_config), built
    from compressed-tensors' own preset schemes and round-tripped through JSON like config.json."""
    scheme = preset_name_to_scheme(preset, ["Linear"])
    scheme.format = fmt
    qc = QuantizationConfig(
        config_groups={"group_0": scheme}, ignore=ignore, format=fmt, quantization_status="compressed"
    )
    d = {
        "version": compressed_tensors.__version__,
        "quant_method": "compressed-tensors",
        "sparsity_config": {},
        "transform_config": {},
        **qc.model_dump(exclude=["quant_method"]),
    }
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def bad(excinfo, path: Path, *fragments: str) -> None:
    err = excinfo.value
    assert err.path == str(path), (err.path, str(path))
    msg = str(err)
    assert "\n" not in msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    assert err.one_line().startswith(str(path) + ": ")


# ---------------------------------------------------------------------------------------------
# safetensors header


def test_header_of_real_file_matches_library(tmp_path):
    tensors = {
        "a.weight": torch.arange(12, dtype=torch.bfloat16).reshape(3, 4),
        "a.weight_scale": torch.tensor(0.5),
        "b.qweight": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "c.weight": torch.ones(4, 2).to(torch.float8_e4m3fn),
        "c.scale": torch.ones(4, 1).to(torch.float8_e8m0fnu),
        "empty": torch.zeros(0, 3),
    }
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    sh = read_shard_header(path)
    assert sh.metadata == {"format": "pt"}
    assert sh.file_size == path.stat().st_size
    infos = sh.tensors
    assert set(infos) == set(tensors)
    blob = path.read_bytes()
    for name, t in tensors.items():
        info = infos[name]
        assert isinstance(info, TensorInfo)
        assert info.shape == tuple(t.shape)
        assert info.file == "m.safetensors"
        assert info.nbytes == t.numel() * t.element_size()
        # absolute offsets point at the tensor's own bytes
        assert blob[info.begin : info.end] == t.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
    assert infos["a.weight"].dtype == "BF16"
    assert infos["a.weight_scale"].shape == ()
    assert infos["c.weight"].dtype == "F8_E4M3" and infos["c.scale"].dtype == "F8_E8M0"


def test_header_of_sparse_file(tmp_path):
    path = tmp_path / "s.safetensors"
    size = write_sparse(path, [("x.weight", "BF16", [4096, 4096]), ("x.scale", "F32", [32, 32])])
    infos = read_header(path, "sub/s.safetensors")
    assert infos["x.weight"].nbytes == 4096 * 4096 * 2
    assert infos["x.scale"].end == size
    assert infos["x.weight"].file == "sub/s.safetensors"


@pytest.mark.parametrize(
    "case",
    [
        # entries out of file order, zero-size tensors sharing an offset, sub-byte dtype, null metadata
        ("reordered", {"b": entry("F32", [1], 8, 12), "a": entry("F32", [2], 0, 8)}, 12),
        ("zero-size", {"z": entry("F32", [0], 0, 0), "a": entry("F32", [1], 0, 4)}, 4),
        ("f4", {"a": entry("F4", [4], 0, 2)}, 2),
        ("null-metadata", {"__metadata__": None, "a": entry("I8", [3], 0, 3)}, 3),
        ("no-tensors", {}, 0),
        ("leading-space", None, 8),
    ],
)
def test_header_odd_but_valid(tmp_path, case):
    name, header, data = case
    path = tmp_path / f"{name}.safetensors"
    if header is None:
        raw_file(path, raw=b"  " + json.dumps({"a": entry("F32", [2], 0, 8)}).encode(), data=data)
    else:
        raw_file(path, header, data=data)
    assert not safetensors_rejects(path)
    infos = read_header(path)
    for info in infos.values():
        assert info.begin >= 8 and info.end <= path.stat().st_size


A = entry("F32", [2], 0, 8)
BROKEN = [
    # (id, how to write it, message fragments)
    ("short", dict(raw=b"", length=None), ("not a safetensors file", "shorter than the 8-byte")),
    ("huge-length", dict(raw=b"{}", length=7954888484), ("not a safetensors file", "7954888484", "exceeds")),
    ("past-end", dict(raw=b"{}", length=5000), ("truncated", "header says 5000 bytes")),
    ("not-utf8", dict(raw=b'{"\xff": 1}'), ("invalid UTF-8",)),
    (
        "bad-json",
        dict(raw=b'{"a": {"dtype": "F32",\n "shape": [2] "data_offsets": [0, 8]}}', data=8),
        ("invalid JSON at line 2 column",),
    ),
    ("empty-json", dict(raw=b"   "), ("empty JSON header",)),
    ("json-list", dict(header=[1, 2]), ("expected a JSON object", "list")),
    ("metadata-not-strings", dict(header={"__metadata__": {"format": 1}, "a": A}, data=8), ("__metadata__",)),
    ("entry-not-object", dict(header={"a": 3}), ("tensor 'a' is not an object",)),
    ("no-dtype", dict(header={"a": {"shape": [2], "data_offsets": [0, 8]}}, data=8), ("'a' has no dtype",)),
    ("no-shape", dict(header={"a": {"dtype": "F32", "data_offsets": [0, 8]}}, data=8), ("'a' has no shape",)),
    ("no-offsets", dict(header={"a": {"dtype": "F32", "shape": [2]}}, data=8), ("'a' has no data_offsets",)),
    ("unknown-dtype", dict(header={"a": entry("F12", [2], 0, 8)}, data=8), ("unknown dtype 'F12'",)),
    ("lowercase-dtype", dict(header={"a": entry("f32", [2], 0, 8)}, data=8), ("unknown dtype 'f32'",)),
    ("negative-dim", dict(header={"a": entry("F32", [-2, -1], 0, 8)}, data=8), ("invalid shape",)),
    ("bool-dim", dict(header={"a": entry("F32", [True, 2], 0, 8)}, data=8), ("invalid shape",)),
    ("float-dim", dict(header={"a": entry("F32", [2.0], 0, 8)}, data=8), ("invalid shape",)),
    (
        "bad-offsets",
        dict(header={"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}}, data=8),
        ("invalid data_offsets",),
    ),
    ("gap", dict(header={"a": A, "b": entry("F32", [1], 12, 16)}, data=16), ("'b'", "leave a gap", "start at 8")),
    ("overlap", dict(header={"a": A, "b": entry("F32", [2], 4, 12)}, data=12), ("'b'", "overlap")),
    ("not-from-zero", dict(header={"a": entry("F32", [2], 8, 16)}, data=16), ("leave a gap", "start at 0")),
    ("wrong-size", dict(header={"a": entry("F32", [3], 0, 8)}, data=8), ("F32[3] = 12 bytes", "span 8")),
    ("reversed-offsets", dict(header={"a": entry("F32", [0], 8, 0)}, data=8), ("end before they begin",)),
    ("f4-misaligned", dict(header={"a": entry("F4", [3], 0, 2)}, data=2), ("byte boundary",)),
    ("data-truncated", dict(header={"a": A}, data=5), ("truncated", "tensor data ends at byte")),
    ("stray-bytes", dict(header={"a": A}, data=8, tail=b"\0" * 4), ("4 stray bytes",)),
]


@pytest.mark.parametrize("case", BROKEN, ids=[c[0] for c in BROKEN])
def test_header_bad_input(tmp_path, case):
    name, how, fragments = case
    path = tmp_path / f"{name}.safetensors"
    if name == "short":
        path.write_bytes(b"\x10\0\0")
    else:
        raw_file(path, **how)
    with pytest.raises(BadInput) as ei:
        read_header(path)
    bad(ei, path, *fragments)
    assert ei.value.exit_code == 2
    assert safetensors_rejects(path), "our parser rejects a file safetensors accepts"


def test_header_limit_is_safetensors_limit():
    assert MAX_HEADER_BYTES == 100_000_000


def test_header_never_reads_tensor_data(tmp_path):
    # A 1 TB sparse file: reading the data region would take forever and fill memory.
    path = tmp_path / "big.safetensors"
    write_sparse(path, [("w", "BF16", [1 << 20, 1 << 19])])
    assert read_header(path)["w"].nbytes == 1 << 40


# ---------------------------------------------------------------------------------------------
# checkpoint loader


def _tiny(prefix: str = "model.layers.0") -> dict[str, torch.Tensor]:
    return {
        f"{prefix}.self_attn.q_proj.weight": torch.zeros(8, 8, dtype=torch.bfloat16),
        f"{prefix}.input_layernorm.weight": torch.ones(8, dtype=torch.bfloat16),
    }


def test_load_single_file(tmp_path):
    root = make_checkpoint(tmp_path / "ck", {"model.safetensors": {**_tiny(), "lm_head.weight": torch.zeros(4, 8)}})
    inv = load_inventory(root)
    assert inv.root == root and inv.config_path == root / "config.json"
    assert inv.shards == ["model.safetensors"] and inv.index_path is None
    assert inv.config == {"model_type": "llama"} and inv.hf_quant_config is None
    assert inv.declared.method is None
    assert len(inv.tensors) == 3
    assert inv.modules["model.layers.0.self_attn.q_proj"].kind == "bf16"
    assert inv.modules["lm_head"].kind == "fp32"
    assert len(inv.digest) == 64
    assert [t.name for t in inv.tensors_under("model.layers.0.self_attn")] == ["model.layers.0.self_attn.q_proj.weight"]


def test_load_sharded_with_index_and_progress(tmp_path):
    root = make_checkpoint(
        tmp_path / "ck",
        {
            "model-00001-of-00002.safetensors": _tiny("model.layers.0"),
            "model-00002-of-00002.safetensors": _tiny("model.layers.1"),
        },
    )
    calls = []
    inv = load_inventory(root, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]
    assert inv.index_path == root / "model.safetensors.index.json"
    assert inv.shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert inv.tensors["model.layers.1.input_layernorm.weight"].file == "model-00002-of-00002.safetensors"


def test_load_without_index_takes_every_shard_sorted(tmp_path):
    root = make_checkpoint(
        tmp_path / "ck",
        {"b.safetensors": _tiny("model.layers.1"), "a.safetensors": _tiny("model.layers.0")},
        index=False,
    )
    inv = load_inventory(str(root))
    assert inv.shards == ["a.safetensors", "b.safetensors"] and inv.index_path is None
    assert len(inv.tensors) == 4


def test_digest_depends_on_layout_only(tmp_path):
    tensors = {**_tiny("model.layers.0"), **_tiny("model.layers.1")}
    one = load_inventory(make_checkpoint(tmp_path / "one", {"model.safetensors": tensors}))
    halves = dict(list(tensors.items())[:2]), dict(list(tensors.items())[2:])
    two_root = make_checkpoint(tmp_path / "two", {"x-1.safetensors": halves[1], "x-2.safetensors": halves[0]})
    two = load_inventory(two_root)
    assert one.digest == two.digest
    for f in two_root.iterdir():
        os.utime(f, (1, 1))
    assert load_inventory(two_root).digest == two.digest
    changed = dict(tensors)
    changed["model.layers.0.self_attn.q_proj.weight"] = torch.zeros(8, 8, dtype=torch.float16)
    assert load_inventory(make_checkpoint(tmp_path / "three", {"model.safetensors": changed})).digest != one.digest
    reshaped = dict(tensors)
    reshaped["model.layers.0.self_attn.q_proj.weight"] = torch.zeros(4, 16, dtype=torch.bfloat16)
    assert (
        layout_digest(
            load_inventory(make_checkpoint(tmp_path / "four", {"model.safetensors": reshaped})).tensors.values()
        )
        != one.digest
    )


def test_load_sparse_layout(tmp_path):
    specs = [
        (f"layers.{i}.ffn.experts.{e}.{w}.{leaf}", dt, shape)
        for i in range(2)
        for e in range(4)
        for w in ("w1", "w2", "w3")
        for leaf, dt, shape in (("weight", "I8", [2048, 2048]), ("scale", "F8_E8M0", [2048, 128]))
    ]
    write_sharded(tmp_path, specs, 3)
    (tmp_path / "config.json").write_text("{}")
    inv = load_inventory(tmp_path)
    assert len(inv.tensors) == len(specs) and len(inv.shards) == 3
    assert {m.kind for m in inv.modules.values()} == {"fp4-dsv4"}


def test_load_missing_directory(tmp_path):
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path / "nope")
    bad(ei, tmp_path / "nope", "no such checkpoint directory")


def test_load_not_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(BadInput) as ei:
        load_inventory(f)
    bad(ei, f, "not a directory")


def test_load_no_config(tmp_path):
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path)
    bad(ei, tmp_path / "config.json", "no config.json")


def test_load_invalid_config_json_says_line_and_column(tmp_path):
    (tmp_path / "config.json").write_text('{\n  "model_type": "llama",\n  "x": [1, 2,]\n}')
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path)
    bad(ei, tmp_path / "config.json", "invalid JSON at line 3 column 14")


def test_load_config_not_object(tmp_path):
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path)
    bad(ei, tmp_path / "config.json", "expected a JSON object", "list")


def test_load_config_not_utf8(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path)
    bad(ei, tmp_path / "config.json", "not UTF-8")


def test_load_invalid_hf_quant_config(tmp_path):
    root = make_checkpoint(tmp_path, {"model.safetensors": _tiny()})
    (root / "hf_quant_config.json").write_text('{"producer": ')
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(ei, root / "hf_quant_config.json", "invalid JSON at line 1")


def test_load_no_safetensors(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(BadInput) as ei:
        load_inventory(tmp_path)
    bad(ei, tmp_path, "no *.safetensors files")


def test_load_index_names_missing_shard(tmp_path):
    root = make_checkpoint(
        tmp_path, {"model-1.safetensors": _tiny("model.layers.0"), "model-2.safetensors": _tiny("model.layers.1")}
    )
    (root / "model-2.safetensors").unlink()
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(ei, root / "model.safetensors.index.json", "model-2.safetensors", "does not exist")


def test_load_index_tensor_missing_from_shard(tmp_path):
    root = make_checkpoint(
        tmp_path, {"model-1.safetensors": _tiny("model.layers.0"), "model-2.safetensors": _tiny("model.layers.1")}
    )
    index = json.loads((root / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.1.mlp.down_proj.weight"] = "model-2.safetensors"
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(
        ei,
        root / "model.safetensors.index.json",
        "model.layers.1.mlp.down_proj.weight",
        "model-2.safetensors",
        "header lacks",
    )


def test_load_shard_tensor_missing_from_index(tmp_path):
    root = make_checkpoint(
        tmp_path, {"model-1.safetensors": _tiny("model.layers.0"), "model-2.safetensors": _tiny("model.layers.1")}
    )
    index = json.loads((root / "model.safetensors.index.json").read_text())
    del index["weight_map"]["model.layers.0.input_layernorm.weight"]
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(
        ei,
        root / "model-1.safetensors",
        "model.layers.0.input_layernorm.weight",
        "not in",
        "model.safetensors.index.json",
    )


@pytest.mark.parametrize("indexed", [True, False])
def test_load_same_tensor_in_two_shards(tmp_path, indexed):
    root = make_checkpoint(
        tmp_path,
        {
            "model-1.safetensors": _tiny("model.layers.0"),
            "model-2.safetensors": {**_tiny("model.layers.1"), "model.layers.0.input_layernorm.weight": torch.ones(8)},
        },
        index=indexed,
    )
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(
        ei,
        root / "model-2.safetensors",
        "model.layers.0.input_layernorm.weight",
        "in both model-1.safetensors and model-2.safetensors",
    )


def test_load_index_without_weight_map(tmp_path):
    root = make_checkpoint(tmp_path, {"model.safetensors": _tiny()})
    (root / "model.safetensors.index.json").write_text('{"metadata": {}}')
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(ei, root / "model.safetensors.index.json", "weight_map")


@pytest.mark.parametrize(
    "weight_map, fragment",
    [({}, "weight_map is empty"), ({"a.weight": ["model.safetensors"]}, "weight_map['a.weight']")],
)
def test_load_index_bad_weight_map(tmp_path, weight_map, fragment):
    root = make_checkpoint(tmp_path, {"model.safetensors": _tiny()})
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(ei, root / "model.safetensors.index.json", fragment)


def test_load_leaves_gc_as_it_found_it(tmp_path):
    import gc

    root = make_checkpoint(tmp_path, {"model.safetensors": _tiny()})
    assert gc.isenabled()
    load_inventory(root)
    assert gc.isenabled()
    with pytest.raises(BadInput):
        load_inventory(tmp_path / "missing")
    assert gc.isenabled()


def test_load_bad_shard_names_the_shard(tmp_path):
    root = make_checkpoint(
        tmp_path, {"model-1.safetensors": _tiny("model.layers.0"), "model-2.safetensors": _tiny("model.layers.1")}
    )
    with open(root / "model-2.safetensors", "r+b") as f:
        f.truncate(f.seek(0, 2) - 3)
    with pytest.raises(BadInput) as ei:
        load_inventory(root)
    bad(ei, root / "model-2.safetensors", "truncated")


def test_load_passes_declared_quant(tmp_path):
    qc = llm_compressor_config("FP8_DYNAMIC", "float-quantized", ["lm_head"])
    root = make_checkpoint(
        tmp_path,
        {
            "model.safetensors": {
                "model.layers.0.mlp.down_proj.weight": torch.zeros(8, 8).to(torch.float8_e4m3fn),
                "model.layers.0.mlp.down_proj.weight_scale": torch.ones(8, 1),
                "lm_head.weight": torch.zeros(4, 8, dtype=torch.bfloat16),
            }
        },
        config={"model_type": "llama", "quantization_config": qc},
    )
    inv = load_inventory(root)
    assert inv.declared.method == "compressed-tensors"
    assert inv.modules["model.layers.0.mlp.down_proj"].kind == "ct-fp8"
    assert inv.modules["lm_head"].kind == "bf16"


# ---------------------------------------------------------------------------------------------
# declared quantization


def test_declared_none(tmp_path):
    d = parse_declared({"model_type": "llama"}, None, tmp_path)
    assert d.method is None and d.source is None and d.exclusions == [] and d.raw is None


def test_declared_ct_w4a16(tmp_path):
    qc = llm_compressor_config("W4A16", "pack-quantized", ["lm_head", "re:.*mtp.*"])
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.method == "compressed-tensors" and d.source == "config.json"
    assert d.exclusions == ["lm_head", "re:.*mtp.*"]
    assert d.exclusion_key == "quantization_config.ignore"
    g = d.details["groups"]["group_0"]
    assert g["targets"] == ["Linear"] and g["format"] == "pack-quantized"
    assert g["weights"]["num_bits"] == 4 and g["weights"]["type"] == "int"
    assert g["weights"]["strategy"] == "group" and g["weights"]["group_size"] == 128
    assert g["input_activations"] is None
    assert d.details["format"] == "pack-quantized" and d.details["quantization_status"] == "compressed"
    assert d.raw == qc


def test_declared_ct_fp8_and_block(tmp_path):
    d = parse_declared(
        {"quantization_config": llm_compressor_config("FP8_DYNAMIC", "float-quantized", [])}, None, tmp_path
    )
    w = d.details["groups"]["group_0"]["weights"]
    assert (w["num_bits"], w["type"], w["strategy"]) == (8, "float", "channel")
    assert d.details["groups"]["group_0"]["input_activations"]["strategy"] == "token"
    d = parse_declared(
        {"quantization_config": llm_compressor_config("FP8_BLOCK", "float-quantized", [])}, None, tmp_path
    )
    w = d.details["groups"]["group_0"]["weights"]
    assert w["strategy"] == "block" and w["block_structure"] == [128, 128]


def test_declared_ct_nvfp4(tmp_path):
    qc = llm_compressor_config("NVFP4", "nvfp4-pack-quantized", ["lm_head"])
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    g = d.details["groups"]["group_0"]
    assert g["format"] == "nvfp4-pack-quantized"
    assert (g["weights"]["num_bits"], g["weights"]["type"], g["weights"]["strategy"], g["weights"]["group_size"]) == (
        4,
        "float",
        "tensor_group",
        16,
    )
    assert g["input_activations"]["num_bits"] == 4


def test_declared_ct_preset_group_names_and_compression_config(tmp_path):
    qc = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"W4A16": ["Linear"]},
        "ignore": ["lm_head"],
    }
    d = parse_declared({"compression_config": qc}, None, tmp_path)
    assert d.exclusion_key == "compression_config.ignore"
    assert d.details["groups"]["W4A16"]["weights"]["group_size"] == 128


def test_declared_ct_from_text_config(tmp_path):
    qc = llm_compressor_config("W4A16", "pack-quantized", ["re:.*vision.*"])
    d = parse_declared({"text_config": {"quantization_config": qc}}, None, tmp_path)
    assert d.method == "compressed-tensors"
    assert d.exclusion_key == "text_config.quantization_config.ignore"


@pytest.mark.parametrize(
    "mutate, fragments",
    [
        (
            lambda q: q["config_groups"]["group_0"]["weights"].update(num_bits="four"),
            ("quantization_config.config_groups.group_0.weights.num_bits", "'four'"),
        ),
        (
            lambda q: q["config_groups"]["group_0"]["weights"].update(type="intx"),
            ("quantization_config.config_groups.group_0.weights.type",),
        ),
        (
            lambda q: q["config_groups"]["group_0"].pop("targets"),
            ("quantization_config.config_groups.group_0.targets", "Field required"),
        ),
        (lambda q: q.update(ignore="lm_head"), ("quantization_config.ignore",)),
        (lambda q: q.update(config_groups={"W9A9": ["Linear"]}), ("quantization_config.config_groups", "W9A9")),
    ],
)
def test_declared_ct_invalid(tmp_path, mutate, fragments):
    qc = llm_compressor_config("W4A16", "pack-quantized", [])
    mutate(qc)
    with pytest.raises(BadInput) as ei:
        parse_declared({"quantization_config": qc}, None, tmp_path)
    bad(ei, tmp_path / "config.json", "invalid compressed-tensors config", *fragments)


def test_declared_quantization_config_not_object(tmp_path):
    with pytest.raises(BadInput) as ei:
        parse_declared({"quantization_config": ["fp8"]}, None, tmp_path)
    bad(ei, tmp_path / "config.json", "quantization_config must be an object")


def test_declared_modelopt_hf_quant_config_nvfp4(tmp_path):
    hq = {
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {
            "quant_algo": "NVFP4",
            "kv_cache_quant_algo": "FP8",
            "group_size": 16,
            "exclude_modules": ["lm_head", "model.layers.61*"],
        },
    }
    d = parse_declared({"model_type": "deepseek_v3"}, hq, tmp_path)
    assert d.method == "modelopt_fp4" and d.source == "hf_quant_config.json"
    assert d.exclusions == ["lm_head", "model.layers.61*"]
    assert d.exclusion_key == "quantization.exclude_modules"
    assert d.details["quant_algo"] == "NVFP4" and d.details["kv_cache_quant_algo"] == "FP8"
    assert d.details["group_size"] == 16


def test_declared_modelopt_hf_quant_config_fp8(tmp_path):
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    assert parse_declared({}, hq, tmp_path).method == "modelopt"


def test_declared_modelopt_config_json_form(tmp_path):
    qc = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "group_size": 16,
        "ignore": ["lm_head", "*mtp*"],
        "kv_cache_scheme": {"type": "float", "num_bits": 8},
        "producer": {"name": "modelopt"},
    }
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "exclude_modules": ["x"]}}
    d = parse_declared({"quantization_config": qc}, hq, tmp_path)
    assert d.method == "modelopt_fp4" and d.source == "config.json"  # config.json wins, as in vLLM
    assert d.exclusions == ["lm_head", "*mtp*"] and d.exclusion_key == "quantization_config.ignore"
    assert d.details["kv_cache_quant_algo"] == "FP8" and d.details["hf_quant_config_ignored"]
    qc2 = {"quant_method": "modelopt_fp4", "quant_algo": "nvfp4", "exclude_modules": ["lm_head"]}
    d = parse_declared({"quantization_config": qc2}, None, tmp_path)
    assert d.method == "modelopt_fp4" and d.exclusion_key == "quantization_config.exclude_modules"


def test_declared_modelopt_mixed_precision(tmp_path):
    layers = {
        "model.layers.0.mlp.experts": {"quant_algo": "NVFP4"},
        "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"},
    }
    hq = {
        "producer": {"name": "modelopt"},
        "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers},
    }
    d = parse_declared({}, hq, tmp_path)
    assert d.method == "modelopt_mixed" and d.details["quantized_layers"] == layers
    # config.json without the per-layer map: vLLM falls back to hf_quant_config.json for it
    d = parse_declared(
        {"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}}, hq, tmp_path
    )
    assert d.method == "modelopt_mixed" and d.details["quantized_layers"] == layers
    assert d.details["quantized_layers_source"] == "hf_quant_config.json"


def test_declared_modelopt_exclusions_must_be_list(tmp_path):
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "exclude_modules": "lm_head"}}
    with pytest.raises(BadInput) as ei:
        parse_declared({}, hq, tmp_path)
    bad(ei, tmp_path / "hf_quant_config.json", "quantization.exclude_modules must be a list")


def test_declared_deepseek_fp8_block(tmp_path):
    qc = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "scale_fmt": "ue8m0",
        "weight_block_size": [128, 128],
        "ignored_layers": ["model.layers.61.eh_proj"],
    }
    d = parse_declared({"model_type": "deepseek_v3", "quantization_config": qc}, None, tmp_path)
    assert d.method == "fp8" and d.exclusions == ["model.layers.61.eh_proj"]
    assert d.exclusion_key == "quantization_config.ignored_layers"
    assert d.details["weight_block_size"] == [128, 128] and d.details["scale_fmt"] == "ue8m0"
    assert "vllm_method" not in d.details
    qc = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["mtp"]}
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.exclusions == ["mtp"] and d.exclusion_key == "quantization_config.modules_to_not_convert"


def test_declared_deepseek_v4(tmp_path):
    qc = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "scale_fmt": "ue8m0",
        "weight_block_size": [128, 128],
    }
    d = parse_declared({"model_type": "deepseek_v4", "expert_dtype": "fp4", "quantization_config": qc}, None, tmp_path)
    assert d.method == "fp8" and d.details["vllm_method"] == "deepseek_v4_fp8"
    assert d.details["expert_dtype"] == "fp4" and d.exclusions == []


def test_declared_fp8_bad_block_size(tmp_path):
    with pytest.raises(BadInput) as ei:
        parse_declared({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128]}}, None, tmp_path)
    bad(ei, tmp_path / "config.json", "quantization_config.weight_block_size")


def test_declared_gptq(tmp_path):
    qc = {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": 128,
        "desc_act": False,
        "sym": True,
        "lm_head": False,
        "dynamic": {"-:.*mtp.*": {}, "+:.*down_proj.*": {"bits": 8}},
        "modules_in_block_to_quantize": [["self_attn.q_proj"], ["mlp.down_proj"]],
        "checkpoint_format": "gptq",
    }
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.method == "gptq" and d.exclusions == ["-:.*mtp.*"]
    assert d.exclusion_key == "quantization_config.dynamic"
    assert d.details["bits"] == 4 and d.details["desc_act"] is False and d.details["lm_head"] is False
    assert d.details["dynamic"] == qc["dynamic"]
    assert d.details["modules_in_block_to_quantize"] == qc["modules_in_block_to_quantize"]


def test_declared_awq(tmp_path):
    qc = {
        "quant_method": "awq",
        "bits": 4,
        "group_size": 128,
        "zero_point": True,
        "version": "gemm",
        "modules_to_not_convert": ["mtp", "lm_head"],
    }
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.method == "awq" and d.exclusions == ["mtp", "lm_head"]
    assert d.exclusion_key == "quantization_config.modules_to_not_convert"
    assert (d.details["bits"], d.details["group_size"], d.details["zero_point"]) == (4, 128, True)


def test_declared_unknown_method_kept(tmp_path):
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.method == "bitsandbytes" and d.raw == qc and d.exclusions == []


def test_declared_quark(tmp_path):
    """AMD Quark's export config (the layout amd/DeepSeek-R1-0528-MXFP4 publishes): `exclude`
    read as its exclusion list, the rest kept as details; a part vLLM would refuse (no
    `export`) is left to the probe, which reports it in the probed release's words."""
    mx = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
    qc = {
        "quant_method": "quark",
        "exclude": ["lm_head", "re:.*mlp.gate$", "mtp.layers.0.mlp.experts.0.gate_proj"],
        "export": {"kv_cache_group": [], "pack_method": "reorder", "weight_format": "real_quantized"},
        "global_quant_config": {"weight": {**mx, "is_dynamic": False}, "input_tensors": {**mx, "is_dynamic": True}},
        "layer_quant_config": {"*.o_proj": {}},
        "layer_type_quant_config": {},
        "version": "0.11rc1+5ff5fbf6b2",
    }
    d = parse_declared({"quantization_config": qc}, None, tmp_path)
    assert d.method == "quark" and d.exclusion_key == "quantization_config.exclude"
    assert d.exclusions == qc["exclude"]
    assert d.details["weight_dtype"] == "fp4" and d.details["pack_method"] == "reorder"
    assert d.details["layer_quant_config"] == ["*.o_proj"]
    del qc["export"]
    assert parse_declared({"quantization_config": qc}, None, tmp_path).details["pack_method"] is None
    qc["exclude"] = "lm_head"
    with pytest.raises(BadInput, match=r"quantization_config\.exclude must be a list of strings"):
        parse_declared({"quantization_config": qc}, None, tmp_path)


def test_declared_method_normalized(tmp_path):
    qc = {"quant_method": "compressed_tensors", "config_groups": {}}
    assert parse_declared({"quantization_config": qc}, None, tmp_path).method == "compressed-tensors"
    qc = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}
    d = parse_declared({"model_type": "gpt_oss", "quantization_config": qc}, None, tmp_path)
    assert d.method == "mxfp4" and d.details["vllm_method"] == "gpt_oss_mxfp4"


# ---------------------------------------------------------------------------------------------
# fingerprints (tensors written by the real safetensors library)

F8, E8M0 = torch.float8_e4m3fn, torch.float8_e8m0fnu


def _t(shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


FORMATS = {
    # module -> (tensors under it, expected kind)
    "dense.q_proj": ({"weight": _t((64, 32))}, "bf16"),
    "half.q_proj": ({"weight": _t((64, 32), torch.float16)}, "fp16"),
    "norm": ({"weight": _t((32,), torch.float32)}, "fp32"),
    "modelopt_fp8.q_proj": (
        {"weight": _t((64, 32), F8), "weight_scale": torch.tensor(1.0), "input_scale": torch.tensor(1.0)},
        "fp8",
    ),
    "ct_fp8.q_proj": ({"weight": _t((64, 32), F8), "weight_scale": _t((64, 1))}, "ct-fp8"),
    "block.q_proj": ({"weight": _t((256, 256), F8), "weight_scale_inv": _t((2, 2), torch.float32)}, "fp8-block"),
    "dsv4.wo_a": ({"weight": _t((256, 256), F8), "scale": _t((2, 2), E8M0)}, "fp8-dsv4"),
    "dsv4.experts.0.w1": ({"weight": _t((64, 16), torch.int8), "scale": _t((64, 1), E8M0)}, "fp4-dsv4"),
    "w4a16.q_proj": (
        {
            "weight_packed": _t((64, 4), torch.int32),
            "weight_scale": _t((64, 1)),
            "weight_shape": torch.tensor([64, 32]),
        },
        "ct-pack-quantized",
    ),
    "ct_nvfp4.q_proj": (
        {
            "weight_packed": _t((64, 16), torch.uint8),
            "weight_scale": _t((64, 2), F8),
            "weight_global_scale": _t((1,), torch.float32),
            "input_global_scale": _t((1,), torch.float32),
        },
        "ct-nvfp4",
    ),
    "modelopt_nvfp4.q_proj": (
        {
            "weight": _t((64, 16), torch.uint8),
            "weight_scale": _t((64, 2), F8),
            "weight_scale_2": torch.tensor(1.0),
            "input_scale": torch.tensor(1.0),
        },
        "modelopt-nvfp4",
    ),
    "gptq.q_proj": (
        {
            "qweight": _t((4, 64), torch.int32),
            "qzeros": _t((1, 8), torch.int32),
            "scales": _t((1, 64), torch.float16),
            "g_idx": _t((32,), torch.int32),
        },
        "gptq",
    ),
    "gptq_noidx.q_proj": (
        {"qweight": _t((4, 64), torch.int32), "qzeros": _t((1, 8), torch.int32), "scales": _t((1, 64), torch.float16)},
        "gptq",
    ),
    "awq.q_proj": (
        {"qweight": _t((32, 8), torch.int32), "qzeros": _t((1, 8), torch.int32), "scales": _t((1, 64), torch.float16)},
        "awq",
    ),
    "quark.q_proj": ({"weight": _t((64, 16), torch.uint8), "weight_scale": _t((64, 1), torch.uint8)}, "mxfp4"),
    "ct_mxfp4.q_proj": ({"weight_packed": _t((64, 16), torch.uint8), "weight_scale": _t((64, 1), E8M0)}, "mxfp4"),
    "mxfp8.q_proj": ({"weight": _t((64, 32), F8), "weight_scale": _t((64, 1), E8M0)}, "mxfp8"),
    "int8.q_proj": ({"weight": _t((64, 32), torch.int8), "weight_scale": _t((64, 1))}, "int8"),
    "partial_nvfp4.q_proj": ({"weight": _t((64, 16), torch.uint8), "weight_scale": _t((64, 2), F8)}, "fp4-packed"),
    "orphan.q_proj": ({"weight_scale_inv": _t((2, 2), torch.float32)}, "unknown"),
    "odd.q_proj": ({"weight": _t((4,), torch.int64)}, "unknown"),
}


@pytest.fixture(scope="module")
def fingerprinted(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp")
    tensors = {f"{m}.{leaf}": t for m, (leaves, _) in FORMATS.items() for leaf, t in leaves.items()}
    # gpt-oss: fused 3-D experts stored as *_blocks/*_scales without a .weight leaf
    tensors.update(
        {
            "model.layers.0.mlp.experts.gate_up_proj_blocks": _t((4, 64, 1, 16), torch.uint8),
            "model.layers.0.mlp.experts.gate_up_proj_scales": _t((4, 64, 1), torch.uint8),
            "model.layers.0.mlp.experts.gate_up_proj_bias": _t((4, 64)),
            "model.layers.0.mlp.experts.down_proj_blocks": _t((4, 32, 1, 16), torch.uint8),
            "model.layers.0.mlp.experts.down_proj_scales": _t((4, 32, 1), torch.uint8),
            "model.layers.1.mlp.experts.gate_up_proj": _t((4, 32, 64)),
            "model.layers.1.mlp.experts.down_proj": _t((4, 64, 32)),
            "model.layers.1.self_attn.k_scale": torch.tensor(1.0),
        }
    )
    make_checkpoint(root, {"model.safetensors": tensors})
    return load_inventory(root)


@pytest.mark.parametrize("module", list(FORMATS))
def test_fingerprint_kind(fingerprinted, module):
    leaves, kind = FORMATS[module]
    mf = fingerprinted.modules[module]
    assert mf.kind == kind, (module, mf)
    assert mf.suffixes == tuple(sorted(leaves))
    assert kind in KINDS
    assert mf.quantized == (kind not in ("bf16", "fp16", "fp32", "unknown"))


def test_fingerprint_weight_dtype(fingerprinted):
    m = fingerprinted.modules
    assert m["dsv4.experts.0.w1"].weight_dtype == "I8"
    assert m["w4a16.q_proj"].weight_dtype == "I32"
    assert m["block.q_proj"].weight_dtype == "F8_E4M3"
    assert m["gptq.q_proj"].weight_dtype == "I32"
    assert m["norm"].weight_dtype == "F32"
    assert m["orphan.q_proj"].weight_dtype is None


def test_fingerprint_fused_experts(fingerprinted):
    m = fingerprinted.modules
    gu = m["model.layers.0.mlp.experts.gate_up_proj"]
    assert gu.kind == "mxfp4" and gu.weight_dtype == "U8"
    assert gu.suffixes == ("gate_up_proj_bias", "gate_up_proj_blocks", "gate_up_proj_scales")
    assert m["model.layers.0.mlp.experts.down_proj"].kind == "mxfp4"
    bare = m["model.layers.1.mlp.experts.gate_up_proj"]
    assert bare.kind == "bf16" and bare.suffixes == ("gate_up_proj",)
    assert "model.layers.0.mlp.experts" not in m
    assert m["model.layers.1.self_attn"].kind == "fp32"  # KV-cache scale only


def test_fingerprint_hint_settles_fp8_flavour():
    leaves = {
        "weight": TensorInfo("x.weight", "F8_E4M3", (64, 32), "f", 8, 2056),
        "weight_scale": TensorInfo("x.weight_scale", "F32", (), "f", 2056, 2060),
    }
    assert classify_module("x", leaves).kind == "fp8"
    assert classify_module("x", leaves, "compressed-tensors").kind == "ct-fp8"
    leaves["weight_scale"] = TensorInfo("x.weight_scale", "F32", (64, 1), "f", 2056, 2312)
    assert classify_module("x", leaves).kind == "ct-fp8"
    assert classify_module("x", leaves, "modelopt").kind == "fp8"
    assert classify_module("x", leaves, "fp8").kind == "fp8"


def test_fingerprint_sparse_dsv4_layout():
    specs = {
        "mtp.0.e_proj.weight": ("F8_E4M3", (4096, 8192)),
        "mtp.0.e_proj.scale": ("F8_E8M0", (32, 64)),
        "mtp.0.ffn.experts.7.w2.weight": ("I8", (4096, 1024)),
        "mtp.0.ffn.experts.7.w2.scale": ("F8_E8M0", (4096, 64)),
        "mtp.0.ffn.shared_experts.w1.weight": ("BF16", (2048, 4096)),
        "mtp.0.norm.weight": ("BF16", (4096,)),
    }
    tensors = [TensorInfo(n, dt, shape, "f", 0, 0) for n, (dt, shape) in specs.items()]
    mods = fingerprint_modules(tensors)
    assert {k: v.kind for k, v in mods.items()} == {
        "mtp.0.e_proj": "fp8-dsv4",
        "mtp.0.ffn.experts.7.w2": "fp4-dsv4",
        "mtp.0.ffn.shared_experts.w1": "bf16",
        "mtp.0.norm": "bf16",
    }


def test_split_module():
    assert split_module("layers.0.ffn.experts.3.w1.weight") == ("layers.0.ffn.experts.3.w1", "weight")
    assert split_module("model.layers.0.mlp.experts.gate_up_proj") == (
        "model.layers.0.mlp.experts.gate_up_proj",
        "gate_up_proj",
    )
    assert split_module("model.layers.0.mlp.experts.down_proj_blocks") == (
        "model.layers.0.mlp.experts.down_proj",
        "down_proj_blocks",
    )
    assert split_module("model.layers.0.mlp.experts.w13_weight_scale") == (
        "model.layers.0.mlp.experts.w13",
        "w13_weight_scale",
    )
    assert split_module("model.layers.0.mlp.shared_experts.w1") == ("model.layers.0.mlp.shared_experts", "w1")
    assert split_module("model.layers.0.mlp.gate.e_score_correction_bias") == (
        "model.layers.0.mlp.gate",
        "e_score_correction_bias",
    )
    assert split_module("bare") == ("bare", "bare")


def test_is_quantized_tensor_name():
    for leaf in (
        "weight_scale",
        "weight_scale_inv",
        "weight_scale_2",
        "scale",
        "qweight",
        "qzeros",
        "scales",
        "g_idx",
        "weight_packed",
        "weight_shape",
        "weight_global_scale",
        "input_scale",
        "k_scale",
        "gate_up_proj_blocks",
        "down_proj_scales",
        "weight_zero_point",
    ):
        assert is_quantized_tensor_name(leaf), leaf
    assert is_quantized_tensor_name("w13_weight_scale")
    for leaf in (
        "weight",
        "bias",
        "e_score_correction_bias",
        "gate_up_proj",
        "gate_up_proj_bias",
        "attn_sink",
        "hc_attn_scale",
        "hc_head_base",
    ):
        assert not is_quantized_tensor_name(leaf), leaf


def test_declared_mlx_has_no_vllm_loader(tmp_path):
    """mlx-lm writes `quantization` (and its Hugging Face twin `quantization_config`) as
    {group_size, bits, mode} with no quant_method: no vLLM quantization method reads it, so the
    lint says so in one line instead of listing every load error of an unquantized build."""
    q = {"group_size": 64, "bits": 4, "mode": "affine"}
    with pytest.raises(BadInput, match=r"MLX \(mlx-lm\) checkpoint: vLLM has no loader") as e:
        parse_declared({"quantization": q, "quantization_config": dict(q)}, None, tmp_path)
    assert e.value.path.endswith("config.json") and "\n" not in str(e.value)
    # A `quantization` block beside a real quant_method is that method's, not MLX's.
    d = parse_declared({"quantization": q, "quantization_config": {"quant_method": "fp8"}}, None, tmp_path)
    assert d.method == "fp8"


def test_declared_modelslim_has_no_vllm_loader(tmp_path):
    """msModelSlim exports describe their quantization in quant_model_description.json (config.json
    carries none); vLLM reads no such file (vllm-ascend's `--quantization ascend` does)."""
    (tmp_path / "quant_model_description.json").write_text(
        json.dumps({"model_quant_type": "W8A8", "version": "1.0.0", "model.layers.0.mlp.down_proj.weight": "W8A8"})
    )
    with pytest.raises(BadInput, match=r"ModelSlim export \(W8A8\): vLLM reads no quant_model_description\.json"):
        parse_declared({"model_type": "qwen3"}, None, tmp_path)
