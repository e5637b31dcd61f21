"""The smaller items of issue #25 point 7, each a test that failed before its fix: bad-input
lines clipped, quantization rule lists bounded before the probe, a checkpoint's settings file
that links outside never read, no hub token or cache secret in the probe's environment."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mtplint.config.settings import settings_files
from mtplint.core.errors import BadInput, clip
from mtplint.core.launch_env import child_environ
from mtplint.inventory.checkpoint import load_inventory
from mtplint.pipeline.preflight import check_config

from fixtures.sparse import write_sparse


def _checkpoint(d: Path, quantization_config: dict, layers: int = 2) -> Path:
    d.mkdir(parents=True)
    config = {
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "num_hidden_layers": layers,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 256,
        "quantization_config": quantization_config,
    }
    (d / "config.json").write_text(json.dumps(config))
    tensors = [(f"model.layers.{i}.mlp.down_proj.weight", "BF16", (64, 128)) for i in range(layers)]
    write_sparse(d / "model.safetensors", tensors)
    return d


def test_a_thousand_element_value_gives_one_short_line(tmp_path):
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": list(range(1000))}
    d = _checkpoint(tmp_path / "ck", qc)
    with pytest.raises(BadInput) as e:
        load_inventory(d)
    line = e.value.one_line()
    assert len(line) <= len(str(d / "config.json")) + 2 + 480, len(line)  # the message was 4,9xx characters
    assert line.startswith(str(d / "config.json")) and "weight_block_size" in line and "999]" in line


def test_clip_keeps_both_ends_and_says_how_much_is_left_out():
    text = "a" * 300 + "b" * 5000 + "c" * 100
    out = clip(text, 480)
    assert len(out) <= 480 and out.startswith("a" * 300) and out.endswith("c" * 100) and "characters" in out
    assert clip("short", 480) == "short"


def test_twenty_thousand_gptq_dynamic_rules_are_bad_input_in_a_second(tmp_path):
    dynamic = {f"-:model.layers.{i}.mlp.experts.{j}.down_proj": {} for i in range(2) for j in range(10_003)}
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True, "dynamic": dynamic}
    d = _checkpoint(tmp_path / "ck", qc)
    inventory = load_inventory(d)
    started = time.monotonic()
    with pytest.raises(BadInput) as e:
        check_config(inventory)
    assert time.monotonic() - started < 5
    assert "quantization_config.dynamic has 20006 entries" in str(e.value)
    assert e.value.path == str(d / "config.json")


def test_a_rule_list_as_long_as_the_modules_stays_lintable(tmp_path):
    ignore = [f"model.layers.{i}.mlp.down_proj" for i in range(2)] * 600  # 1,200 > the floor, <= 2 x modules
    d = _checkpoint(tmp_path / "ck", {"quant_method": "fp8", "activation_scheme": "dynamic", "ignore": ignore}, 2)
    inventory = load_inventory(d)
    inventory.modules = {f"m{i}": inventory.modules[next(iter(inventory.modules))] for i in range(700)}
    check_config(inventory)  # no error: 1,200 <= max(1024, 2 x 700)


def test_a_checkpoint_settings_file_linking_outside_is_never_read(tmp_path, monkeypatch):
    outside = tmp_path / "secret.toml"
    outside.write_text('fail-on = "top secret value"\n')
    d = tmp_path / "ck"
    d.mkdir()
    (d / "mtplint.toml").symlink_to(outside)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as e:
        settings_files(d)
    assert "outside the checkpoint" in str(e.value) and "top secret" not in e.value.one_line()


def test_a_checkpoint_settings_file_linking_inside_is_read(tmp_path, monkeypatch):
    d = tmp_path / "ck"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "settings.toml").write_text("num-speculative-tokens = 2\n")
    (d / "mtplint.toml").symlink_to(d / "sub" / "settings.toml")
    monkeypatch.chdir(tmp_path)
    (found,) = settings_files(d)
    assert found.owner == "checkpoint"


def test_the_probe_environment_holds_no_hub_token_or_cache_secret(monkeypatch):
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MTPLINT_CACHE_SECRET"):
        monkeypatch.setenv(name, "hf_s3cr3t")
    monkeypatch.setenv("VLLM_SOMETHING", "kept")
    env = child_environ()
    assert "hf_s3cr3t" not in env.values() and env["VLLM_SOMETHING"] == "kept"
