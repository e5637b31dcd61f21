"""`mtplint PATH --reference SOURCE` (catalog MTPL-027, MTP019/MTP020): bits per weight and formats
against the source, sampled bytes of same-format modules, the reference on the hub, and bad input.

The rule cases (tests/cases/MTP019.toml, MTP020.toml) cover formats through the real probe; sampled
bytes need data, and fixtures are sparse zeros: here copies of one get real bytes in the windows
that are read, then one copy is altered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import HubServer, shard_requests
from hub_server import run_cli as hub_cli
from mtplint.core.run_inputs import RunInputs
from paths import ROOT
from recorded_cases import read_recorded
from test_input_hardening import assert_bad_input

from fixtures.build import cached_build
from fixtures.sparse import write_sparse

MTPLINT = [sys.executable, "-m", "mtplint"]
SOURCE = "glm45-air-bf16-official"  # BF16 trunk and MTP layer 46
QUANTIZED_MTP = "glm45-air-nvfp4-mtp-head-omitted"  # ModelOpt NVFP4, the MTP layer too


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, timeout=600)


def sparse_copy(recipe: str, dest: Path) -> Path:
    # A fixture's shards are holes: a plain copy would write hundreds of GB of zeros.
    subprocess.run(["cp", "-r", "--sparse=always", str(cached_build(recipe)), str(dest)], check=True)
    return dest


def judged(path: Path, reference: Path | None, select: str = "MTP019,MTP020") -> list[dict]:
    """The findings of `mtplint PATH [--reference R] --select ...`, with the recorded probe report of
    the source's clean case standing in for the probe (the probe never sees a reference, and the
    copies have the source's layout)."""
    from mtplint.cli.check import check_cmd
    from mtplint.config.settings import load_settings
    from mtplint.inventory.checkpoint import load_inventory
    from mtplint.pipeline.reference import load_reference, reference_origin
    from mtplint.pipeline.session import judge
    from mtplint.probe.report import ProbeReport
    from mtplint.probe.runner import ProbeRequest

    args = [str(path), "--select", select, *(["--reference", str(reference)] if reference else [])]
    params = dict(check_cmd.make_context("check", args).params)
    params.pop("path")
    settings = load_settings(path, params).lint
    record = read_recorded(SOURCE)
    assert record is not None
    report = ProbeReport.from_json(record["report"])
    ref = load_reference(settings)
    inputs = RunInputs.from_json({**record["inputs"], "path": str(path)}).replace(
        reference=reference_origin(ref, settings.reference)
    )
    findings, _ = judge(
        path, load_inventory(path), report, inputs, ProbeRequest.replaying(report.request), settings, reference=ref
    )
    return [f.to_dict() for f in findings]


def _fill(root: Path, tensor, pattern: bytes) -> None:
    """Non-zero bytes in every window the comparison reads of one tensor."""
    from mtplint.inventory.reference import window_offsets

    with open(root / tensor.file, "r+b") as f:
        for off, size in window_offsets(tensor.nbytes):
            f.seek(tensor.begin + off)
            f.write((pattern * (size // len(pattern) + 1))[:size])


@pytest.fixture
def filled_pair(tmp_path):
    """Two copies of the source whose sampled MTP windows hold the same non-zero bytes."""
    from mtplint.inventory.checkpoint import load_inventory
    from mtplint.inventory.reference import compare

    artifact, source = sparse_copy(SOURCE, tmp_path / "artifact"), sparse_copy(SOURCE, tmp_path / "source")
    inv = load_inventory(artifact)
    sampled = [p for p in compare(inv, load_inventory(source)).pairs if p.sample is not None]
    assert len(sampled) > 2 and all(p.sample.status == "no data" for p in sampled)  # sparse: all zeros
    for i, p in enumerate(sampled):
        for root in (artifact, source):
            _fill(root, inv.tensors[p.tensor], bytes([i % 251 + 1, 7, 3]))
    return artifact, source, sampled, inv


def test_byte_identical_mtp_block_is_silent(filled_pair):
    from mtplint.inventory.checkpoint import load_inventory
    from mtplint.inventory.reference import compare

    artifact, source, _sampled, _inv = filled_pair
    statuses = {p.sample.status for p in compare(load_inventory(artifact), load_inventory(source)).pairs if p.sample}
    assert statuses == {"same"}
    assert judged(artifact, source) == []


def test_sampled_bytes_that_differ_are_reported(filled_pair):
    artifact, source, sampled, inv = filled_pair
    changed = sampled[1]
    _fill(artifact, inv.tensors[changed.tensor], b"\x55\xaa")  # a converter's rewrite
    # An all-zero window on one side is no data, never a difference (a placeholder export).
    with open(source / inv.tensors[sampled[2].tensor].file, "r+b") as f:
        f.seek(inv.tensors[sampled[2].tensor].begin)
        f.write(bytes(4096))
    findings = judged(artifact, source)
    assert [f["code"] for f in findings] == ["MTP020"]
    f = findings[0]
    assert f["severity"] == "warning" and f["basis"] == "reference"
    assert (
        "1 module(s) changed from the reference: 1 bf16 -> bf16 (16 -> 16 bits per weight, same format" in f["message"]
    )
    assert f["evidence"]["sampled_bytes_differ"] == [changed.module]
    assert f["location"] == {"file": changed.file, "tensor": changed.tensor, "config_key": None}
    assert judged(artifact, None) == []  # without --reference: nothing compares


def _tiny(root: Path, mtp: str, trunk: str = "BF16") -> Path:
    """A 2-layer GLM-4.5-style checkpoint whose MTP layer is model.layers.2, in these dtypes
    (F8_E4M3: block FP8 with weight_scale_inv; U8: ModelOpt NVFP4)."""
    root.mkdir()
    config = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "num_hidden_layers": 2}
    (root / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    tensors = []
    for layer, dtype in ((0, trunk), (1, trunk), (2, mtp)):
        m = f"model.layers.{layer}.mlp.down_proj"
        if dtype == "F8_E4M3":
            tensors += [(f"{m}.weight", "F8_E4M3", (256, 256)), (f"{m}.weight_scale_inv", "F32", (2, 2))]
        elif dtype == "U8":
            tensors += [
                (f"{m}.weight", "U8", (256, 128)),
                (f"{m}.weight_scale", "F8_E4M3", (256, 16)),
                (f"{m}.weight_scale_2", "F32", ()),
            ]
        else:
            tensors.append((f"{m}.weight", dtype, (256, 256)))
    write_sparse(root / "model.safetensors", tensors)
    return root


@pytest.mark.parametrize(
    ("mtp", "trunk", "fires"),
    [
        ("F8_E4M3", "BF16", "below the trunk's 16 bits"),  # FP8 MTP block in a BF16 model
        ("F8_E4M3", "F8_E4M3", None),  # an official FP8 release of a BF16 model
        ("U8", "U8", "below 8 bits"),  # NVFP4 everywhere: 4 bits is too few for a draft
        ("BF16", "U8", None),  # the MTP block kept at the source's precision
    ],
)
def test_bits_per_weight_against_the_source_and_the_trunk(tmp_path, mtp, trunk, fires):
    from mtplint.engine.evaluate import evaluate
    from mtplint.inventory.checkpoint import load_inventory

    artifact = load_inventory(_tiny(tmp_path / "a", mtp, trunk))
    source = load_inventory(_tiny(tmp_path / "s", "BF16"))
    report = read_recorded(SOURCE)["report"]  # MTP019/MTP020 read no probe fact
    findings, _ = evaluate(artifact, report, RunInputs(path="a"), select=["MTP019", "MTP020"], reference=source)
    if fires is None:
        assert findings == []
    else:
        assert [f.code for f in findings] == ["MTP019"]
        assert fires in findings[0].message and "model.layers.2.mlp.down_proj" in findings[0].message


# --- bad input and usage: exit 2, one line, nothing probed ------------------------------------


@pytest.mark.slow
def test_unreadable_reference_names_it(tmp_path):
    target = cached_build(QUANTIZED_MTP)
    assert_bad_input(run(str(target), "--reference", str(tmp_path / "nope")), "nope", "(the --reference checkpoint)")


@pytest.mark.slow
def test_reference_without_mtp_cannot_be_the_source():
    target = cached_build(QUANTIZED_MTP)
    no_mtp = cached_build("glm45-air-mtp-dropped")
    assert_bad_input(
        run(str(target), "--reference", str(no_mtp)), str(no_mtp), "no MTP tensors", "(the --reference checkpoint)"
    )


@pytest.mark.slow
def test_reference_belongs_to_one_checkpoint_and_not_to_a_draft():
    target, source = cached_build(QUANTIZED_MTP), cached_build(SOURCE)
    assert_bad_input(run(str(target), str(source), "--reference", str(source)), "one PATH")
    assert_bad_input(run(str(target), "--draft", str(source), "--reference", str(source)), "--draft")


@pytest.mark.probe
def test_reference_on_the_hub_compares_formats_without_downloading_shards(tmp_path):
    target, source = cached_build(QUANTIZED_MTP), cached_build(SOURCE)
    with HubServer() as hub:
        commit = hub.add("org/glm-src", source)
        proc = hub_cli(hub, tmp_path / "home", str(target), "--reference", "hf://org/glm-src", "--format", "json", "-q")
        stats = hub.stats()
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    schema = json.loads((ROOT / "lint" / "reporters" / "report.schema.json").read_text())
    pytest.importorskip("jsonschema").validate(report, schema)  # basis "reference", inputs.reference
    assert report["inputs"]["reference"] == f"hf://org/glm-src@{commit}"
    [f] = [f for f in report["findings"] if f["code"] == "MTP019"]
    assert "391 bf16 -> modelopt-nvfp4 (16 -> 4 bits per weight, below 8 bits)" in f["message"]
    assert "hub repository: its shards are not downloaded" in f["evidence"]["sampling"]
    assert not [f for f in report["findings"] if f["code"] == "MTP020"]
    # Headers only: every shard request is a range read.
    assert all(h.range for hits in shard_requests(stats).values() for h in hits)


def test_lfs_pointers_and_short_shards_have_no_data(tmp_path):
    from mtplint.inventory.model import TensorInfo
    from mtplint.inventory.reference import compare_windows

    t = TensorInfo("w.weight", "BF16", (4096, 4), "model.safetensors", 8, 8 + 32768)
    full, pointer, short = tmp_path / "full", tmp_path / "pointer", tmp_path / "short"
    for d in (full, pointer, short):
        d.mkdir()
    (full / t.file).write_bytes(b"\x01" * t.end)
    (pointer / t.file).write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 32776\n")
    (short / t.file).write_bytes(b"\x01" * 100)
    assert compare_windows(full, t, full, t).status == "same"
    assert compare_windows(full, t, pointer, t).reason == "model.safetensors is a Git LFS pointer"
    assert compare_windows(short, t, full, t).reason == "model.safetensors is shorter than its header says"


@pytest.mark.parametrize(("trunk", "fires"), [("BF16", True), ("F8_E4M3", False)])
def test_a_module_only_the_mtp_block_has_is_held_against_the_trunks_matrices(tmp_path, trunk, fires):
    """GLM's `eh_proj` has no trunk counterpart: FP8 in a BF16 model is below the trunk, in an
    FP8 model it is not."""
    from mtplint.engine.evaluate import evaluate
    from mtplint.inventory.checkpoint import load_inventory

    def ckpt(root: Path, eh_proj: str, trunk: str) -> Path:
        _tiny(root, trunk, trunk)
        eh = [("model.layers.2.eh_proj.weight", "BF16", (256, 512))]
        if eh_proj == "F8_E4M3":
            eh = [("model.layers.2.eh_proj.weight", "F8_E4M3", (256, 512))]
            eh.append(("model.layers.2.eh_proj.weight_scale_inv", "F32", (2, 4)))
        mtp = "F8_E4M3" if trunk == "F8_E4M3" else "BF16"
        layers = [(f"model.layers.{i}.mlp.down_proj.weight", mtp if i == 2 else trunk, (256, 256)) for i in range(3)]
        scales = [(f"model.layers.{i}.mlp.down_proj.weight_scale_inv", "F32", (2, 2)) for i in range(3)]
        write_sparse(root / "model.safetensors", layers + (scales if trunk == "F8_E4M3" else []) + eh)
        return root

    artifact = load_inventory(ckpt(tmp_path / "a", "F8_E4M3", trunk))
    source = load_inventory(ckpt(tmp_path / "s", "BF16", "BF16"))
    report = read_recorded(SOURCE)["report"]
    findings, _ = evaluate(artifact, report, RunInputs(path="a"), select=["MTP019", "MTP020"], reference=source)
    messages = [f.message for f in findings if f.code == "MTP019"]
    if fires:
        assert len(messages) == 1 and "below the 16 bits most of the trunk's matrices keep" in messages[0]
        assert "model.layers.2.eh_proj" in messages[0]
    else:
        assert messages == []
