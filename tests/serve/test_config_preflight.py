"""#16 items 6 and 9: a config.json vLLM cannot accept, or one declaring far more layers than
the checkpoint holds, is bad input (exit 2) naming config.json and the key, found before
vLLM runs; a config-stage error vLLM raises for a key's type is bad input too, while a
config honest about having no MTP (depth 0) stays a finding."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mtplint.core.errors import BadInput
from mtplint.inventory.checkpoint import load_inventory
from mtplint.pipeline.preflight import check_config, explain_depth_zero, raise_for_config_error
from mtplint.probe.report import ErrorRecord, Frame

from fixtures.build import cached_build

RECIPES = {
    "deepseek_v3": "dsv3-fp8-official",
    "deepseek_v4": "dsv4-flash-official",
    "glm45": "glm45-air-bf16-official",
    "mimo": "mimo-bf16",
    "qwen3_next": "qwen3-next-fp8",
    "qwen35": "qwen35-moe-bf16-official",
}
DEPTH_KEY = {
    "deepseek_v3": "num_nextn_predict_layers",
    "deepseek_v4": "num_nextn_predict_layers",
    "glm45": "num_nextn_predict_layers",
    "mimo": "num_nextn_predict_layers",
    "qwen3_next": None,  # its config names no depth: vLLM's default of one MTP layer
    "qwen35": "text_config.mtp_num_hidden_layers",
}


@pytest.fixture(scope="module")
def inventories() -> dict[str, Any]:
    return {family: load_inventory(cached_build(recipe)) for family, recipe in RECIPES.items()}


def _mutated(inventory: Any, key: str, value: Any) -> Any:
    config = copy.deepcopy(inventory.config)
    holder = config
    *parents, leaf = key.split(".")
    for p in parents:
        holder = holder[p]
    holder[leaf] = value
    return dataclasses.replace(inventory, config=config)


def _refused(inventory: Any) -> str:
    with pytest.raises(BadInput) as info:
        check_config(inventory)
    line = info.value.one_line()
    assert line.startswith(str(inventory.config_path) + ": "), line
    return line


@pytest.mark.parametrize("family", sorted(RECIPES))
@pytest.mark.slow
def test_every_family_as_published_passes(inventories, family):
    check_config(inventories[family])


def _text(family: str, key: str) -> str:
    return f"text_config.{key}" if family == "qwen35" else key


# (family, key, value, words the message must hold)
MUTATIONS = [
    *[(f, _text(f, "hidden_size"), "7168", ["hidden_size", "positive integer", "'7168'"]) for f in RECIPES],
    *[(f, _text(f, "num_attention_heads"), 0, ["num_attention_heads", "positive integer"]) for f in RECIPES],
    *[(f, _text(f, "num_hidden_layers"), 1.5, ["num_hidden_layers", "positive integer"]) for f in RECIPES],
    ("deepseek_v3", "num_experts_per_tok", 257, ["num_experts_per_tok = 257", "n_routed_experts = 256"]),
    ("glm45", "num_experts_per_tok", 129, ["num_experts_per_tok = 129", "n_routed_experts = 128"]),
    ("qwen3_next", "num_experts_per_tok", 513, ["num_experts_per_tok = 513", "num_experts = 512"]),
    ("qwen35", "text_config.num_experts_per_tok", 0, ["text_config.num_experts_per_tok = 0", "from 1"]),
    ("deepseek_v3", "n_group", 0, ["n_group", "positive integer"]),
    ("glm45", "n_group", 0, ["n_group", "positive integer"]),
    ("deepseek_v3", "n_group", 3, ["n_routed_experts = 256 is not divisible by n_group = 3"]),
    ("deepseek_v3", "topk_group", 9, ["topk_group = 9 is above n_group = 8"]),
    ("deepseek_v3", "n_routed_experts", "256", ["n_routed_experts", "'256'"]),
    ("deepseek_v4", "num_key_value_heads", -1, ["num_key_value_heads", "positive integer"]),
    ("mimo", "num_key_value_heads", 5, ["num_attention_heads = 32 is not a multiple of num_key_value_heads = 5"]),
    ("mimo", "hidden_size", 4100, ["hidden_size = 4100 is not divisible by num_attention_heads = 32"]),
    ("glm45", "rms_norm_eps", "1e-5", ["rms_norm_eps", "number"]),
    ("deepseek_v4", "tie_word_embeddings", "false", ["tie_word_embeddings", "true or false"]),
    ("deepseek_v4", "hidden_act", 7, ["hidden_act", "string"]),
    ("deepseek_v4", "num_nextn_predict_layers", "1", ["num_nextn_predict_layers", "non-negative integer"]),
    ("glm45", "num_nextn_predict_layers", -1, ["num_nextn_predict_layers", "non-negative integer"]),
    ("mimo", "num_nextn_predict_layers", True, ["num_nextn_predict_layers", "non-negative integer"]),
    # Item 6: sizes far beyond what the tensors hold.
    *[
        (f, DEPTH_KEY[f], 1_000_000, [f"{DEPTH_KEY[f]} = 1000000", "cannot describe this checkpoint"])
        for f in RECIPES
        if DEPTH_KEY[f]
    ],
    ("qwen3_next", "num_nextn_predict_layers", 17, ["num_nextn_predict_layers = 17", "max(16, 4 x that) = 16"]),
    *[
        (f, _text(f, "num_hidden_layers"), 1_000_000, ["num_hidden_layers = 1000000", "cannot describe"])
        for f in RECIPES
    ],
]


@pytest.mark.parametrize(("family", "key", "value", "needles"), MUTATIONS, ids=lambda v: str(v)[:24])
def test_mutated_config_is_bad_input_naming_the_key(inventories, family, key, value, needles):
    line = _refused(_mutated(inventories[family], key, value))
    for needle in needles:
        assert needle in line, line


# What a config may legitimately declare: more MTP layers than it ships (MTP006), depth 0
# (a checkpoint honest about having none: `mtplint fix` writes it), nulls where vLLM derives.
ACCEPTED = [
    ("deepseek_v4", "num_nextn_predict_layers", 2),
    ("deepseek_v4", "num_nextn_predict_layers", 16),
    ("glm45", "num_nextn_predict_layers", 0),
    ("qwen35", "text_config.mtp_num_hidden_layers", 4),
    ("mimo", "num_hidden_layers", 128),  # 36 on disk: under the floor of 128
    ("deepseek_v3", "num_hidden_layers", 200),  # 62 on disk: under 4 x 62
    ("deepseek_v3", "q_lora_rank", None),
    ("mimo", "sliding_window", None),
    ("deepseek_v4", "tie_word_embeddings", 0),
]


@pytest.mark.parametrize(("family", "key", "value"), ACCEPTED, ids=lambda v: str(v)[:24])
def test_what_a_checkpoint_may_declare_passes(inventories, family, key, value):
    check_config(_mutated(inventories[family], key, value))


def test_just_above_the_layer_ceiling_is_refused(inventories):
    on_disk = 62  # DeepSeek-V3: decoder layers 0..60 and the MTP layer 61
    check_config(_mutated(inventories["deepseek_v3"], "num_hidden_layers", 4 * on_disk))
    line = _refused(_mutated(inventories["deepseek_v3"], "num_hidden_layers", 4 * on_disk + 1))
    assert f"max(128, 4 x that) = {4 * on_disk}" in line


# --- vLLM's own config-stage errors --------------------------------------------------


def _error(type_: str, message: str, code: str | None = None) -> ErrorRecord:
    frame = Frame(file="vllm/transformers_utils/config.py", line=445, function="parse", code=code)
    return ErrorRecord(type=type_, message=message, frame=frame)


def test_a_type_error_naming_a_key_is_bad_input(inventories):
    inv = inventories["glm45"]
    err = _error(
        "StrictDataclassFieldValidationError",
        "Validation error for field 'initializer_range':\n    TypeError: Field 'initializer_range' expected float",
        code="config = AutoConfig.from_pretrained(",
    )
    with pytest.raises(BadInput) as info:
        raise_for_config_error(inv, err)
    assert "config.json: vLLM cannot accept initializer_range" in info.value.one_line()


def test_a_type_error_in_vllm_code_names_the_keys_of_its_line(inventories):
    err = _error(
        "TypeError", "unsupported operand type(s) for //", code="self.head_dim = hidden_size // num_attention_heads"
    )
    with pytest.raises(BadInput) as info:
        raise_for_config_error(inventories["mimo"], err)
    assert "hidden_size / num_attention_heads" in info.value.one_line()


@pytest.mark.parametrize(
    ("type_", "message"),
    [
        # Deployment inputs vLLM refuses on purpose: findings about this artifact on this deployment.
        ("ValueError", "Total number of attention heads (96) must be divisible by tensor parallel size (7)."),
        ("ValueError", "Unknown quantization method: foo. Must be one of ['fp8', ...]"),
        # A TypeError that names no key of config.json (a vLLM/transformers mismatch): not bad input.
        ("TypeError", "__init__() got an unexpected keyword argument 'bogus_argument'"),
    ],
)
def test_other_config_stage_errors_stay_findings(inventories, type_, message):
    raise_for_config_error(inventories["glm45"], _error(type_, message))


def test_depth_zero_says_why_instead_of_a_bare_zero_division(inventories):
    inv = _mutated(inventories["glm45"], "num_nextn_predict_layers", 0)
    err = _error("ZeroDivisionError", "integer modulo by zero", code="and self.num_speculative_tokens % n_predict != 0")
    raise_for_config_error(inv, err)  # no key of config.json named: not a schema error
    explain_depth_zero(inv, err)
    assert err.message.startswith("num_nextn_predict_layers = 0: config.json declares no MTP layer")
    assert "method=mtp" in err.message and err.message.endswith("(integer modulo by zero)")
    explain_depth_zero(inv, err)  # once only
    assert err.message.count("declares no MTP layer") == 1
    raise_for_config_error(inv, err)  # naming the key now, it is still the finding `mtplint fix` expects


# --- through the command line ---------------------------------------------------------


def _copy_with_config(recipe: str, dest: Path, key: str, value: Any) -> Path:
    """The fixture with one config key changed (shards copied sparse: a few MB)."""
    subprocess.run(["cp", "-r", "--sparse=always", str(cached_build(recipe)), str(dest)], check=True)
    config = json.loads((dest / "config.json").read_text())
    holder = config
    *parents, leaf = key.split(".")
    for p in parents:
        holder = holder[p]
    holder[leaf] = value
    (dest / "config.json").write_text(json.dumps(config))
    return dest


def _mtplint(path: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "tmpdir").mkdir(exist_ok=True)
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmpdir"))
    return subprocess.run(
        [sys.executable, "-m", "mtplint", str(path), "--no-cache", "-q", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _assert_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtplint: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("key", "value", "needles"),
    [
        ("hidden_size", "4096", ["config.json: hidden_size must be a positive integer, not '4096'"]),
        ("num_nextn_predict_layers", 1_000_000, ["config.json: num_nextn_predict_layers = 1000000 cannot describe"]),
    ],
)
def test_cli_refuses_before_probing(tmp_path, key, value, needles):
    path = _copy_with_config("glm45-air-bf16-official", tmp_path / "ckpt", key, value)
    proc = _mtplint(path, tmp_path)
    _assert_exit_2(proc, *needles)
    assert not list((tmp_path / "tmpdir").glob("mtplint-probe-*"))  # no probe was started


@pytest.mark.probe
def test_a_key_vllm_rejects_by_type_is_bad_input_through_the_real_probe(tmp_path):
    # initializer_range is not a key the preflight reads: transformers' strict config class refuses it.
    path = _copy_with_config("glm45-air-bf16-official", tmp_path / "ckpt", "initializer_range", "0.02")
    proc = _mtplint(path, tmp_path)
    _assert_exit_2(proc, "config.json: vLLM cannot accept initializer_range", "expected float, got str")
    assert not list((tmp_path / "tmpdir").glob("mtplint-probe-*"))  # the probe's temp directory went with it
