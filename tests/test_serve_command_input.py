"""The user's own `vllm serve` command as lint input (lint/config/serve_args.py, probe/engine_config.py).

The quick tests cover what mtplint reads before probing (the shorthand flags, the file
format, conflicts with its own options); the probe tests lint one firing layout both ways
and compare the findings, and check that a flag vLLM rejects is exit 2 in vLLM's words.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mtplint.config.serve_args import read_file, shorthands, split_command
from mtplint.config.settings import load_settings
from mtplint.core.errors import BadInput

MTPLINT = [sys.executable, "-m", "mtplint"]
# One MTP001 (a dead per-shard entry) among live per-shard entries of fused layers.
RECIPE = "qwen35-awq-autoround-shard-names-one-dead"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--tensor-parallel-size", "8"], {"tensor_parallel_size": 8}),
        (["-tp", "4", "--tensor-parallel-size=2"], {"tensor_parallel_size": 2}),  # the last one wins
        (["--pipeline-parallel-size=2", "-pp", "3"], {"pipeline_parallel_size": 3}),
        (["--kv-cache-dtype", "fp8", "--port", "8000"], {"kv_cache_dtype": "fp8"}),
        (
            ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}'],
            {"num_speculative_tokens": 2, "speculative_method": "mtp"},
        ),
        (
            ["--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "3"],
            {"num_speculative_tokens": 3, "speculative_method": "mtp"},
        ),
        (["--trust-remote-code", "--max-model-len", "4096"], {"trust_remote_code": True}),
    ],
)
def test_shorthand_flags_read_before_probing(flags, expected):
    assert shorthands(flags, "cmd") == expected


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--tensor-parallel-size", "eight"], "is not an integer"),
        (["--speculative-config", "{method: mtp}"], "is not JSON"),
        (["--speculative-config", '{"method": "eagle3", "model": "/d"}'], "--draft"),
        (["--kv-cache-dtype"], "needs a value"),
    ],
)
def test_unreadable_shorthands_are_bad_input(flags, needle):
    with pytest.raises(BadInput, match=needle):
        shorthands(flags, "cmd")


def test_command_split_into_model_and_flags():
    assert split_command(["vllm", "serve", "./ckpt", "-tp", "2"], "x") == ("./ckpt", ["-tp", "2"])
    assert split_command(["--kv-cache-dtype", "fp8"], "x") == (None, ["--kv-cache-dtype", "fp8"])


def test_serve_args_file_reads_as_a_shell_does(tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(
        "# how we deploy\nvllm serve ./ckpt \\\n  --tensor-parallel-size 8 \\\n"
        '  --speculative-config \'{"method":"mtp","num_speculative_tokens":2}\'\n'
    )
    assert read_file(f) == [
        "vllm",
        "serve",
        "./ckpt",
        "--tensor-parallel-size",
        "8",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":2}',
    ]


def test_settings_take_the_serve_command(tmp_path):
    s = load_settings(tmp_path, {"serve_command": ["vllm", "serve", str(tmp_path), "-tp", "4", "--enforce-eager"]})
    assert s.tensor_parallel_size == 4
    assert s.serve_argv == (str(tmp_path), "-tp", "4", "--enforce-eager")


def test_an_option_contradicting_the_serve_command_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="differs from the command line's --tensor-parallel-size 2"):
        load_settings(tmp_path, {"tensor_parallel_size": 2, "serve_command": ["vllm", "serve", "x", "-tp", "4"]})


def test_serve_command_and_file_together_are_bad_input(tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text("-tp 2\n")
    with pytest.raises(BadInput, match="not both"):
        load_settings(tmp_path, {"serve_args_file": str(f), "serve_command": ["vllm", "serve", "x"]})


def _lint(args: list[str], out: Path, serve: list[str] | None = None) -> tuple[int, dict]:
    """mtplint ARGS (then `-- vllm serve SERVE...`: everything after `--` is vLLM's)."""
    tail = ["--", "vllm", "serve", *serve] if serve else []
    proc = subprocess.run(
        [*MTPLINT, *args, "--format", "json", "--output", str(out), "-q", *tail],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(out.read_text())


def _summary(report: dict) -> tuple[list[tuple[str, str]], dict]:
    inputs = {k: v for k, v in report["inputs"].items() if k != "settings_files"}
    return [(f["code"], f["message"]) for f in report["findings"]], inputs


@pytest.mark.probe
@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "flags"),
    [
        (["--tp", "2"], ["--tensor-parallel-size", "2"]),
        (["--tp", "4", "--kv-cache-dtype", "fp8"], ["-tp", "4", "--kv-cache-dtype=fp8"]),
        (["-n", "3"], ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}']),
        (
            ["--pp", "2", "-n", "2"],
            ["-pp", "2", "--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "2"],
        ),
    ],
)
def test_serve_command_gives_the_findings_of_the_equivalent_options(tmp_path, options, flags):
    from fixtures.build import cached_build

    path = str(cached_build(RECIPE))
    rc_a, by_options = _lint([path, *options], tmp_path / "a.json")
    rc_b, by_command = _lint(["check"], tmp_path / "b.json", serve=[path, *flags, "--enforce-eager"])
    assert rc_a == rc_b
    assert _summary(by_options) == _summary(by_command)
    assert by_command["findings"], "the layout has a finding to compare"


@pytest.mark.probe
@pytest.mark.slow
def test_a_flag_vllm_rejects_is_bad_input_in_its_words(tmp_path):
    from fixtures.build import cached_build

    path = str(cached_build(RECIPE))
    proc = subprocess.run(
        [*MTPLINT, "check", "--", "vllm", "serve", path, "--tensor-parallel-size", "2", "--no-such-flag", "1"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "vllm serve: error: unrecognized arguments: --no-such-flag 1" in line, line
