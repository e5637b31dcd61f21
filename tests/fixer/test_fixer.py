"""`mtplint fix`: each artifact fix, applied to a copy of a fixture through the real vLLM
probe, must make the findings it resolves go away in a fresh lint; --dry-run writes
nothing; originals are kept; an interrupted fix leaves a loadable checkpoint.

Probes are the slow part (~30-45 s each): the fix's own re-lint stores its report in the
session's probe cache, so the `mtplint check` after it is a cache hit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.build import cached_build

pytestmark = pytest.mark.probe

W4A16 = "dsv4-flash-w4a16-bf16mtp"
SHARD_SUFFIX = ".safetensors"


@pytest.fixture(scope="session")
def probe_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fixer-probe-cache")


def copy_fixture(recipe: str, dest: Path) -> Path:
    """Small files copied, sparse shards copied as sparse (a few MB): fixes must never
    touch the cached fixture."""
    src = cached_build(recipe)
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dest)], check=True)
    return dest


def _env(cache: Path) -> dict[str, str]:
    return dict(os.environ, MTPLINT_CACHE_DIR=str(cache))


def _fix_argv() -> list[str]:
    return [sys.executable, "-m", "mtplint", "fix"]


def run_fix(path: Path, args: list[str], cache: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [*_fix_argv(), str(path), "-q", *args], capture_output=True, text=True, env=_env(cache), timeout=1200
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def check(path: Path, args: list[str], cache: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", str(path), "--format", "json", "-q", *args],
        capture_output=True,
        text=True,
        env=_env(cache),
        timeout=900,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def snapshot(root: Path) -> dict[str, object]:
    """Every file: JSON and other small files by content, shards by stat and header
    (hashing 160 GB of holes would take minutes; a write changes size or mtime)."""
    out: dict[str, object] = {}
    for p in sorted(root.iterdir()):
        st = p.stat()
        if p.name.endswith(SHARD_SUFFIX):
            with open(p, "rb") as f:
                head = hashlib.sha256(f.read(1 << 20)).hexdigest()
            out[p.name] = (st.st_size, st.st_mtime_ns, st.st_ino, head)
        else:
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def shards_only(snap: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in snap.items() if k.endswith(SHARD_SUFFIX)}


def codes(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in report["findings"]:
        out.setdefault(f["code"], []).append(f)
    return out


# --- the exclusion fixes on the seed-000/001 artifact ------------------------------------


@pytest.fixture(scope="session")
def w4a16_fixed(tmp_path_factory, probe_cache) -> dict:
    path = copy_fixture(W4A16, tmp_path_factory.mktemp("w4a16") / "ckpt")
    only = ["--only", "rewrite-ignore-to-runtime-names,ignore-unquantized-mtp-block"]
    config_before = (path / "config.json").read_bytes()
    mode_before = (path / "config.json").stat().st_mode
    before = snapshot(path)
    dry = run_fix(path, [*only, "--dry-run"], probe_cache)
    after_dry = snapshot(path)
    applied = run_fix(path, only, probe_cache)
    report = check(path, [], probe_cache)
    return {
        "path": path,
        "before": before,
        "after_dry": after_dry,
        "dry": dry,
        "applied": applied,
        "report": report,
        "config_before": config_before,
        "mode_before": mode_before,
    }


def test_dry_run_prints_a_diff_and_changes_no_byte(w4a16_fixed):
    dry = w4a16_fixed["dry"]
    assert dry.returncode == 0, dry.stdout
    assert w4a16_fixed["after_dry"] == w4a16_fixed["before"]
    assert "--- a/config.json" in dry.stdout and "+++ b/config.json" in dry.stdout
    assert '+      "re:^model\\\\.layers\\\\.43\\\\."' in dry.stdout
    # The config is re-written in its own style: the diff is the edit, not a reformat.
    changed = [ln for ln in dry.stdout.splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
    assert len(changed) <= 4, changed
    assert "nothing written" in dry.stdout


def test_exclusion_fixes_clear_mtp001_errors_and_mtp002(w4a16_fixed):
    applied, report = w4a16_fixed["applied"], w4a16_fixed["report"]
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "re-lint: 0 error(s)" in applied.stdout
    found = codes(report)
    assert "MTP002" not in found, [f["message"] for f in found["MTP002"]]
    assert "MTP005" not in found
    assert all(f["severity"] != "error" for f in found.get("MTP001", [])), found.get("MTP001")
    assert all(f["severity"] != "error" for f in report["findings"])
    ignore = json.loads((w4a16_fixed["path"] / "config.json").read_text())["quantization_config"]["ignore"]
    assert "re:^model\\.layers\\.43\\." in ignore
    assert "re:.*mtp.*" in ignore  # kept for runtimes matching on-disk names


def test_originals_are_kept_and_shards_untouched(w4a16_fixed):
    path = w4a16_fixed["path"]
    assert (path / "config.json.mtplint-orig").read_bytes() == w4a16_fixed["config_before"]
    now = snapshot(path)
    assert shards_only(now) == shards_only(w4a16_fixed["before"])
    assert not [p for p in path.iterdir() if "mtplint-tmp" in p.name]
    assert (path / "config.json").stat().st_mode == w4a16_fixed["mode_before"]


def test_drop_dead_never_drops_an_entry_vllm_now_compares(w4a16_fixed, probe_cache):
    # Once the runtime names are in, the probe no longer reports the kept `re:.*mtp.*` dead (the
    # re-lint has no finding), and --drop-dead drops only what a finding calls dead (issue 13).
    path = w4a16_fixed["path"]
    proc = run_fix(path, ["--only", "rewrite-ignore-to-runtime-names", "--drop-dead"], probe_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to fix" in proc.stdout
    ignore = json.loads((path / "config.json").read_text())["quantization_config"]["ignore"]
    assert "re:.*mtp.*" in ignore and "re:^model\\.layers\\.43\\." in ignore
    assert (path / "config.json.mtplint-orig").read_bytes() == w4a16_fixed["config_before"]
    found = codes(check(path, [], probe_cache))
    assert "MTP001" not in found and "MTP002" not in found


# --- ignore-expert-blocks-as-compared on DeepseekV4FP8Config's per-Linear `ignore` ---------

LEAF = "dsv4-flash-nvfp4-mtp-leaf-excludes"
EXPERTS = "mtp.0.ffn.experts"  # the on-disk name _is_nvfp4_expert_layer compares for layer 43


@pytest.fixture(scope="session")
def leaf_fixed(tmp_path_factory, probe_cache) -> dict:
    path = copy_fixture(LEAF, tmp_path_factory.mktemp("leaf") / "ckpt")
    files = ("config.json", "hf_quant_config.json")
    raw = {n: (path / n).read_bytes() for n in files}
    before = snapshot(path)
    # No --only: the MTP001 finding itself must recommend the fix.
    dry = run_fix(path, ["--dry-run"], probe_cache)
    after_dry = snapshot(path)
    applied = run_fix(path, [], probe_cache)
    return {"path": path, "raw": raw, "before": before, "dry": dry, "after_dry": after_dry, "applied": applied}


def _ignore_lists(root: Path, raw: dict[str, bytes] | None = None) -> tuple[list[str], list[str]]:
    def doc(name: str) -> dict:
        return json.loads(raw[name]) if raw else json.loads((root / name).read_text())

    return (
        doc("config.json")["quantization_config"]["ignore"],
        doc("hf_quant_config.json")["quantization"]["exclude_modules"],
    )


def test_expert_block_fix_dry_run_writes_nothing(leaf_fixed):
    dry = leaf_fixed["dry"]
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert leaf_fixed["after_dry"] == leaf_fixed["before"]
    assert "ignore-expert-blocks-as-compared" in dry.stdout
    assert "rewrite-ignore-to-runtime-names" not in dry.stdout
    for name in ("config.json", "hf_quant_config.json"):
        assert f"--- a/{name}" in dry.stdout and f"+++ b/{name}" in dry.stdout
    added = [ln for ln in dry.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in dry.stdout.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert [ln.replace(" ", "") for ln in added] == [f'+"{EXPERTS}",'] * 2, added  # one line per file
    assert len(removed) == 2 * 768 and all(f'"{EXPERTS}.' in ln for ln in removed)
    assert "nothing written" in dry.stdout
    assert not [n for n in leaf_fixed["after_dry"] if n.endswith((".mtplint-orig", ".mtplint-tmp"))]


def test_expert_block_fix_replaces_the_dead_entries_in_place(leaf_fixed):
    applied, path = leaf_fixed["applied"], leaf_fixed["path"]
    assert applied.returncode == 0, applied.stdout + applied.stderr
    relint = applied.stdout.split("re-lint:", 1)[1]
    assert relint.startswith(" 0 error(s)"), relint
    assert "MTP001" not in relint and "MTP005" not in relint, relint

    old_cfg, old_hq = _ignore_lists(path, leaf_fixed["raw"])
    new_cfg, new_hq = _ignore_lists(path)
    dead = [e for e in old_cfg if e.startswith(EXPERTS + ".")]
    assert len(dead) == 768 and old_hq == old_cfg
    assert not [e for e in new_cfg if e.startswith(EXPERTS + ".")]
    assert EXPERTS in new_cfg and EXPERTS not in old_cfg
    # Written where the first replaced entry was; every other entry unchanged and in order.
    assert new_cfg.index(EXPERTS) == old_cfg.index(dead[0])
    assert [e for e in new_cfg if e != EXPERTS] == [e for e in old_cfg if e not in set(dead)]
    assert new_hq == new_cfg  # hf_quant_config.json carries the same list and moves in step
    for name, raw in leaf_fixed["raw"].items():
        assert (path / f"{name}.mtplint-orig").read_bytes() == raw
    assert shards_only(snapshot(path)) == shards_only(leaf_fixed["before"])
    assert not [p for p in path.iterdir() if "mtplint-tmp" in p.name]


def test_expert_block_replacement_keeps_order_and_adds_each_name_once():
    from mtplint.fixer.ignore_expert_blocks import _replace

    dead = {"mtp.0.ffn.experts.0.w1", "mtp.0.ffn.experts.0.w2"}
    lst = ["head", "mtp.0.ffn.gate", "mtp.0.ffn.experts.0.w1", "x", "mtp.0.ffn.experts.0.w2", "y"]
    assert _replace(lst, dead, [EXPERTS]) == ["head", "mtp.0.ffn.gate", EXPERTS, "x", "y"]
    assert _replace(["a", EXPERTS, "mtp.0.ffn.experts.0.w1"], dead, [EXPERTS]) == ["a", EXPERTS]
    assert _replace(["a", "b"], dead, [EXPERTS]) is None  # a list without them is left alone
    assert _replace(None, dead, [EXPERTS]) is None


# --- set-mtp-depth, alias-mtp-head-embed ---------------------------------------------------


def test_set_mtp_depth_on_a_checkpoint_without_mtp(tmp_path, probe_cache):
    path = copy_fixture("dsv4-flash-no-mtp", tmp_path / "ckpt")
    proc = run_fix(path, ["--only", "set-mtp-depth"], probe_cache)
    assert "num_nextn_predict_layers: 1 -> 0" in proc.stdout
    assert "DISABLES MTP" in proc.stdout
    assert json.loads((path / "config.json").read_text())["num_nextn_predict_layers"] == 0
    found = codes(check(path, [], probe_cache))
    assert "MTP006" not in found
    assert "MTP005" not in found


def test_set_mtp_depth_to_the_layers_shipped(tmp_path, probe_cache):
    """Qwen3.5 declaring 2 MTP layers over a 1-layer block: vLLM raises nothing (Qwen3_5MTP has no
    completeness check); MTP006 counts 1 layer fed, and the fix sets the depth to it."""
    path = copy_fixture("qwen35-mtp-depth-2", tmp_path / "ckpt")
    proc = run_fix(path, ["--only", "set-mtp-depth"], probe_cache)
    assert "text_config.mtp_num_hidden_layers: 2 -> 1" in proc.stdout, proc.stdout + proc.stderr
    assert json.loads((path / "config.json").read_text())["text_config"]["mtp_num_hidden_layers"] == 1
    found = codes(check(path, [], probe_cache))
    assert "MTP006" not in found
    assert "MTP005" not in found


def test_unloaded_nvfp4_head_is_excluded_under_the_name_vllm_compares(tmp_path, probe_cache):
    """MTP018 (catalog A1 on GLM-5): the fix excludes the head by its construction prefix
    `model.layers.78.head`; the module path `model.layers.78.shared_head.head` would be a dead entry."""
    path = copy_fixture("glm5-nvfp4-mtp-head-omitted", tmp_path / "ckpt")
    proc = run_fix(path, ["--only", "ignore-unquantized-mtp-block"], probe_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hf = json.loads((path / "hf_quant_config.json").read_text())["quantization"]["exclude_modules"]
    ignore = json.loads((path / "config.json").read_text())["quantization_config"]["ignore"]
    assert "model.layers.78.head" in hf and "model.layers.78.head" in ignore
    assert "model.layers.78.shared_head.head" not in hf + ignore
    found = codes(check(path, [], probe_cache))
    assert not found, {c: [f["message"] for f in fs] for c, fs in found.items()}


def test_alias_head_embed_on_the_official_layout_under_pp2(tmp_path, probe_cache):
    from mtplint.inventory.safetensors_header import read_shard_header

    path = copy_fixture("dsv4-flash-official", tmp_path / "ckpt")
    before = snapshot(path)
    index_before = json.loads((path / "model.safetensors.index.json").read_text())
    proc = run_fix(path, ["--only", "alias-mtp-head-embed", "--pp", "2"], probe_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    shard = path / "model-mtp-aliases.safetensors"
    header = read_shard_header(shard).tensors
    assert set(header) == {"mtp.0.head.weight", "mtp.0.emb.tok_emb.weight"}
    old = read_shard_header(path / index_before["weight_map"]["head.weight"]).tensors["head.weight"]
    assert (header["mtp.0.head.weight"].dtype, header["mtp.0.head.weight"].shape) == (old.dtype, old.shape)
    assert os.stat(shard).st_blocks * 512 < 1 << 20  # holes copied as holes
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert index["weight_map"]["mtp.0.head.weight"] == shard.name
    assert index["weight_map"]["mtp.0.emb.tok_emb.weight"] == shard.name
    added = sum(t.nbytes for t in header.values())
    assert index["metadata"]["total_size"] == index_before["metadata"]["total_size"] + added
    assert json.loads((path / "model.safetensors.index.json.mtplint-orig").read_text()) == index_before
    now = shards_only(snapshot(path))
    now.pop(shard.name)
    assert now == shards_only(before)

    found = codes(check(path, ["--pp", "2"], probe_cache))
    assert "MTP004" not in found, [f["message"] for f in found["MTP004"]]
    again = run_fix(path, ["--only", "alias-mtp-head-embed", "--pp", "2"], probe_cache)
    assert again.returncode == 0 and "nothing to fix" in again.stdout, again.stdout


def test_unknown_fix_id_is_a_usage_error_before_any_probe(tmp_path):
    proc = subprocess.run(
        [*_fix_argv(), str(tmp_path), "--only", "no-such-fix"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "no-such-fix" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _inv(config: dict, hf_quant: dict | None = None):
    from types import SimpleNamespace

    from mtplint.inventory.declared import parse_declared

    return SimpleNamespace(
        config=config, hf_quant_config=hf_quant, declared=parse_declared(config, hf_quant, Path("/nonexistent"))
    )


def test_exclusion_entries_are_spelled_and_placed_per_format():
    from mtplint.fixer.exclusion_list import exclusion_list

    gptq = {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "dynamic": {"-:^mtp\\.": {}}}}
    lst = exclusion_list(_inv(gptq))
    assert lst.places == [("config.json", "quantization_config.dynamic")]
    assert lst.exact("model.layers.43.fc") == "-:^model\\.layers\\.43\\.fc$"
    assert lst.layer("model.layers.43.") == "-:^model\\.layers\\.43\\."
    doc = json.loads(json.dumps(gptq))
    for ch in lst.add_change("t", [lst.layer("model.layers.43."), lst.exact("model.layers.43.fc")], "x"):
        ch.edit(doc)
    for ch in lst.remove_change("t", ["-:^mtp\\."], "x"):
        ch.edit(doc)
    # The exact name is covered by the layer entry added before it.
    assert doc["quantization_config"]["dynamic"] == {"-:^model\\.layers\\.43\\.": {}}

    fp8 = {
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["lm_head"]}
    }
    lst = exclusion_list(_inv(fp8))
    assert lst.places == [("config.json", "quantization_config.ignored_layers")]
    assert lst.layer("model.layers.61.") is None  # exact matching only

    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
    lst = exclusion_list(_inv({"model_type": "glm4_moe"}, hq))
    assert lst.places == [("hf_quant_config.json", "quantization.exclude_modules")]
    assert lst.layer("model.layers.46.") == "model.layers.46.*"
    both = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}}
    lst = exclusion_list(_inv(both, hq))
    assert lst.places == [
        ("config.json", "quantization_config.ignore"),
        ("hf_quant_config.json", "quantization.exclude_modules"),
    ]
    assert exclusion_list(_inv({"model_type": "x"})) is None


def test_render_keeps_the_json_style(tmp_path):
    from mtplint.fixer.plan import Change, render

    text = '{\n    "a": 1.5e-06,\n    "b": ["x"],\n    "c": "\u00e9"\n}'  # indent 4, escaped, no newline
    (tmp_path / "f.json").write_text(text)
    r = render(tmp_path, [Change(fix="t", file="f.json", summary="", edit=lambda d: d["b"].append("y"))])
    assert r.json["f.json"][1] == text.replace('["x"]', '[\n        "x",\n        "y"\n    ]')


# --- no probe: the shard writer and interrupted writes --------------------------------------


def _write_raw_shard(path: Path, tensors: list[tuple[str, str, tuple[int, ...], bytes | None]]) -> None:
    """A safetensors file whose data is given bytes, or a hole where None."""
    header, offset = {}, 0
    for name, dtype, shape, _data in tensors:
        n = 4 * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        base = f.tell()
        f.truncate(base + offset)
        for name, _d, _s, data in tensors:
            if data is not None:
                f.seek(base + header[name]["data_offsets"][0])
                f.write(data)


def test_shard_writer_copies_bytes_through_holes(tmp_path):
    from mtplint.fixer.apply import CHUNK, write_shard
    from mtplint.fixer.plan import NewTensor
    from mtplint.inventory.safetensors_header import read_shard_header
    from safetensors.numpy import load_file

    rows = CHUNK // (4 * 64) + 3  # more than one copy chunk
    data = os.urandom(4 * 64 * rows)
    data = data[: len(data) // 2] + bytes(len(data) - len(data) // 2)  # real data, then zeros
    _write_raw_shard(
        tmp_path / "src.safetensors",
        [("hole", "F32", (1 << 22,), None), ("head.weight", "F32", (rows, 64), data), ("tail", "F32", (8,), None)],
    )
    src = read_shard_header(tmp_path / "src.safetensors").tensors
    news = [
        NewTensor(f"mtp.0.{n}", t.dtype, t.shape, "src.safetensors", t.begin, t.end)
        for n, t in ((n, src[n]) for n in ("head.weight", "hole"))
    ]
    write_shard(tmp_path, "out.safetensors", news)
    out = load_file(str(tmp_path / "out.safetensors"))
    assert out["mtp.0.head.weight"].tobytes() == data
    assert not out["mtp.0.hole"].any()


@pytest.mark.parametrize(
    "recipe,args",
    [
        (W4A16, {"only": ["rewrite-ignore-to-runtime-names", "ignore-unquantized-mtp-block"], "pp": 1}),
        # Shard, index and (with a stand-in config edit) config.json: all three write steps.
        ("dsv4-flash-official", {"only": ["alias-mtp-head-embed"], "pp": 2, "config_edit": True}),
    ],
)
def test_a_fix_killed_at_any_write_leaves_a_loadable_checkpoint(recipe, args, tmp_path, probe_cache, monkeypatch):
    """os.replace is where a file changes; failing the k-th call stands for a kill there."""
    from mtplint.config.settings import load_settings
    from mtplint.fixer import apply as apply_mod
    from mtplint.fixer.pipeline import choose, lint, plan_all, render_all
    from mtplint.fixer.plan import Change
    from mtplint.inventory.checkpoint import load_inventory

    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(probe_cache))
    pristine = copy_fixture(recipe, tmp_path / "pristine")
    settings = load_settings(pristine, {"pipeline_parallel_size": args["pp"], "quiet": True})
    linted = lint(pristine, settings)
    plans = plan_all(linted, choose(args["only"], linted.findings), {})
    if args.get("config_edit"):
        plans["test"] = [
            Change(
                fix="test",
                file="config.json",
                summary="stand-in config edit",
                edit=lambda doc: doc.__setitem__("mtplint_test", 1),
            )
        ]
    rendered = render_all(linted.inventory.root, plans)
    assert rendered.json or rendered.shards
    old = {n: (pristine / n).read_bytes() for n in rendered.json}
    new = {n: text.encode() for n, (_o, text) in rendered.json.items()}

    real_replace = os.replace
    calls = {"n": 0}

    def counting(*a, **kw):
        calls["n"] += 1
        return real_replace(*a, **kw)

    full = tmp_path / "full"
    subprocess.run(["cp", "-r", "--sparse=always", str(pristine), str(full)], check=True)
    monkeypatch.setattr(os, "replace", counting)
    apply_mod.apply(full, rendered)
    monkeypatch.setattr(os, "replace", real_replace)
    total = calls["n"]
    assert total >= len(rendered.json) + len(rendered.shards)

    for k in range(1, total + 1):
        work = tmp_path / f"killed-{k}"
        subprocess.run(["cp", "-r", "--sparse=always", str(pristine), str(work)], check=True)
        calls["n"] = 0

        def failing(*a, k=k, **kw):
            calls["n"] += 1
            if calls["n"] == k:
                raise OSError("simulated kill")
            return real_replace(*a, **kw)

        monkeypatch.setattr(os, "replace", failing)
        with pytest.raises(OSError, match="simulated kill"):
            apply_mod.apply(work, rendered)
        monkeypatch.setattr(os, "replace", real_replace)
        inv = load_inventory(work)  # raises on a torn index or a shard it cannot read
        for name in rendered.json:
            assert (work / name).read_bytes() in (old[name], new[name]), (k, name)
        if "config.json" in rendered.json and (work / "config.json").read_bytes() == new["config.json"]:
            assert all((work / n).read_bytes() == new[n] for n in rendered.json)  # config last
        assert set(inv.tensors) >= set(linted.inventory.tensors)
        assert not [p for p in work.iterdir() if "mtplint-tmp" in p.name]


def test_quark_and_autoround_exclusions_are_spelled_in_their_own_lists():
    """Quark's `exclude` takes compressed-tensors' `re:` (quark/utils.py should_ignore_layer);
    AutoRound/INC keeps a layer unquantized with an `extra_config` override of 16 bits, keyed by
    name or by a regex (INCConfigParser). Before, both fell to the exact style: INC's list had no
    key at all and the fix offered for its MTP002 planned nothing."""
    from mtplint.fixer.exclusion_list import exclusion_list

    quark = {"quantization_config": {"quant_method": "quark", "exclude": ["lm_head"], "export": {}}}
    lst = exclusion_list(_inv(quark))
    assert lst.places == [("config.json", "quantization_config.exclude")]
    assert lst.layer("mtp.layers.0.") == "re:^mtp\\.layers\\.0\\."

    inc = {"quantization_config": {"quant_method": "auto-round", "bits": 4, "group_size": 128}}
    lst = exclusion_list(_inv(inc))
    assert lst.places == [("config.json", "quantization_config.extra_config")]
    assert lst.layer("mtp.layers.0.") == "^mtp\\.layers\\.0\\."
    doc = json.loads(json.dumps(inc))
    for ch in lst.add_change(
        "t", [lst.layer("mtp.layers.0."), lst.exact("mtp.layers.0.self_attn.o_proj"), lst.exact("mtp.fc")], "x"
    ):
        ch.edit(doc)
    # The exact name under the layer entry is covered by it; the other is written as an override.
    assert doc["quantization_config"]["extra_config"] == {
        "^mtp\\.layers\\.0\\.": {"bits": 16, "data_type": "float"},
        "mtp.fc": {"bits": 16, "data_type": "float"},
    }


def test_autoround_bf16_mtp_block_fix_clears_the_lint(tmp_path, probe_cache):
    """AutoRound/INC export of Qwen3-Next whose BF16 MTP block vLLM builds AWQ (6 MTP002): the fix
    writes `extra_config` overrides of 16 bits for the draft's modules and the re-lint is clean."""
    path = copy_fixture("qwen3-next-autoround-awq-mtp-bf16", tmp_path / "ckpt")
    proc = run_fix(path, ["--only", "ignore-unquantized-mtp-block"], probe_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    extra = json.loads((path / "config.json").read_text())["quantization_config"]["extra_config"]
    assert extra["mtp.fc"] == {"bits": 16, "data_type": "float"}
    found = codes(check(path, [], probe_cache))
    assert not found, {c: [f["message"] for f in fs] for c, fs in found.items()}
