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
from mtplint.config.serve_args import draft_source, read_file, speculative_model, split_command
from mtplint.config.settings import load_settings
from mtplint.core.errors import BadInput

MTPLINT = [sys.executable, "-m", "mtplint"]
# One MTP001 (a dead per-shard entry) among live per-shard entries of fused layers.
RECIPE = "qwen35-awq-autoround-shard-names-one-dead"


@pytest.mark.parametrize(
    ("tokens", "model"),
    [
        (["vllm", "serve", "./ckpt", "-tp", "2"], "./ckpt"),
        (["vllm", "serve", "-tp", "2", "--model", "/m/ckpt", "--enforce-eager"], "/m/ckpt"),
        (["serve", "--model=/m/ckpt"], "/m/ckpt"),
        (["--kv-cache-dtype", "fp8"], None),
    ],
)
def test_the_model_found_as_vllm_finds_it(tokens, model):
    # vLLM moves the first `--model X` to the front (utils/argparse_utils.py), else the first token.
    assert split_command(tokens, "x") == (model, [t for t in tokens if t not in ("vllm", "serve")])


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--speculative-config", '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}'], ("/d", None)),
        (["--speculative_config", '{"model": "org/d", "revision": "abc"}'], ("org/d", "abc")),
        (["-sc", '{"method": "mtp"}'], (None, None)),
        (["--speculative_config.model", "/d", "--speculative-config.num_speculative_tokens", "2"], ("/d", None)),
        (['--speculative-conf={"model": "/d"}'], ("/d", None)),  # an abbreviation argparse takes
        (["--speculative-config", "{not json"], (None, None)),  # vLLM's parser rejects it, in its words
    ],
)
def test_the_draft_named_in_the_speculative_config(flags, expected):
    assert speculative_model(flags) == expected


def test_a_hub_draft_is_read_header_only_at_its_revision(tmp_path):
    assert draft_source("org/draft", "abc") == "hf://org/draft@abc"
    assert draft_source(str(tmp_path), None) == str(tmp_path)


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


def test_settings_keep_the_serve_command_as_written(tmp_path):
    # Nothing of the deployment is pre-read: vLLM's parser reads TP (the probe labels the report
    # with its reading); the command is kept as written, the model the checkpoint linted.
    s = load_settings(tmp_path, {"serve_command": ["vllm", "serve", str(tmp_path), "-tp", "4", "--enforce-eager"]}).lint
    assert s.tensor_parallel_size == 1
    assert s.serve_argv == (str(tmp_path), "-tp", "4", "--enforce-eager")
    assert s.serve_model == str(tmp_path)


def test_a_serve_args_file_is_linted_against_path(tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve -tp 2 --model org/model --speculative_config.num_speculative_tokens 3\n")
    s = load_settings(tmp_path, {"serve_args_file": str(f)}).lint
    assert s.serve_argv == ("-tp", "2", "--model", str(tmp_path), "--speculative_config.num_speculative_tokens", "3")


def test_the_serve_commands_draft_is_the_draft_linted(tmp_path):
    draft = tmp_path / "my-draft"
    draft.mkdir()
    spec = json.dumps({"model": str(draft), "num_speculative_tokens": 2})
    s = load_settings(tmp_path, {"serve_command": ["vllm", "serve", str(tmp_path), "--speculative-config", spec]}).lint
    assert (s.draft, s.serve_draft) == (str(draft), str(draft))
    # The target itself named as the speculative model (the ERNIE recipe's `ernie_mtp`): MTP on it.
    spec = json.dumps({"method": "ernie_mtp", "model": str(tmp_path)})
    s = load_settings(tmp_path, {"serve_command": ["vllm", "serve", str(tmp_path), "--speculative-config", spec]}).lint
    assert (s.draft, s.serve_draft) == (None, str(tmp_path))


def test_a_draft_option_the_command_does_not_serve_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="--draft /other is not in it"):
        load_settings(tmp_path, {"draft": "/other", "serve_command": ["vllm", "serve", str(tmp_path)]})


def test_an_option_vllm_reads_otherwise_from_the_command_is_bad_input(tmp_path):
    from mtplint.pipeline.session import check_pinned
    from mtplint.probe.report import ProbeReport, Request, VllmIdentity

    s = load_settings(tmp_path, {"tensor_parallel_size": 2, "serve_command": ["vllm", "serve", str(tmp_path)]}).lint
    assert s.serve_pinned == (("tensor_parallel_size", 2),)
    read = ProbeReport(VllmIdentity("0.33.0", None), Request([9, 0], "H100", 1, tensor_parallel_size=4))
    with pytest.raises(
        BadInput, match="reads tensor_parallel_size 4 from it; the command line's --tensor-parallel-size 2"
    ):
        check_pinned(s, read)
    read.request.tensor_parallel_size = 2
    check_pinned(s, read)


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
        # Spellings only vLLM's own parser reads right: underscores, dotted keys, abbreviations.
        (["-n", "3"], ["--speculative_config", '{"method": "mtp", "num_speculative_tokens": 3}']),
        (
            ["-n", "3"],
            ["--speculative_config.method", "mtp", "--speculative_config.num_speculative_tokens", "3"],
        ),
        (["--tp", "2"], ["--tensor_parallel_size=2"]),
        (["--tp", "2"], ["--tensor-parallel", "2"]),
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
def test_the_model_given_as_model_option(tmp_path):
    from fixtures.build import cached_build

    path = str(cached_build(RECIPE))
    rc_a, by_options = _lint([path, "-n", "2"], tmp_path / "a.json")
    spec = '{"method": "mtp", "num_speculative_tokens": 2}'
    rc_b, by_command = _lint(["check"], tmp_path / "b.json", serve=["--speculative-config", spec, "--model", path])
    assert (rc_a, _summary(by_options)) == (rc_b, _summary(by_command))


@pytest.mark.probe
@pytest.mark.slow
def test_a_pydantic_rejection_names_the_flag_and_vllms_reason(tmp_path):
    from fixtures.build import cached_build

    path = str(cached_build(RECIPE))
    proc = subprocess.run(
        [*MTPLINT, "check", "--", "vllm", "serve", path, "--compilation-config", '{"mode": "bogus"}'],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "errors.pydantic.dev" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "argument --compilation-config/-cc" in line and "Invalid compilation mode: bogus" in line, line


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
    assert "error: unrecognized arguments: --no-such-flag 1" in line, line


@pytest.mark.parametrize(
    ("tokens", "env", "model"),
    [
        (["VLLM_USE_DEEP_GEMM=0", "vllm", "serve", "/m", "-tp", "8"], {"VLLM_USE_DEEP_GEMM": "0"}, "/m"),
        (["env", "A=1", "B=x=y", "vllm", "serve", "--model", "/m"], {"A": "1", "B": "x=y"}, "/m"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"], {}, "/m"),
        (["X=1", "/usr/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/m"], {"X": "1"}, "/m"),
        (["HF_TOKEN=hf_secret", "vllm", "serve", "/m"], {}, "/m"),  # a secret never reaches the probe
    ],
)
def test_a_command_as_recipes_write_it(tokens, env, model):
    from mtplint.config.serve_args import is_serve_command, serve_env

    assert is_serve_command(tokens)
    assert serve_env(tokens) == env
    assert split_command(tokens, "x")[0] == model


def test_not_a_serve_command():
    from mtplint.config.serve_args import is_serve_command

    assert not is_serve_command(["A=1", "./ckpt"]) and not is_serve_command(["python", "-m", "http.server"])


def test_the_environment_written_before_the_command_is_probed_and_keyed(tmp_path, monkeypatch):
    from mtplint.pipeline.serve_command import serve_command
    from mtplint.probe.runner import ProbeRequest

    monkeypatch.delenv("VLLM_USE_DEEP_GEMM", raising=False)
    (tmp_path / "config.json").write_text("{}")
    tokens = ["VLLM_USE_DEEP_GEMM=0", "HF_TOKEN=hf_secret", "vllm", "serve", str(tmp_path), "-tp", "2"]
    lint = load_settings(tmp_path, {"serve_command": tokens}).lint
    assert lint.serve_env == (("VLLM_USE_DEEP_GEMM", "0"),)
    assert lint.serve_argv == (str(tmp_path), "-tp", "2")
    plain = ProbeRequest(sm=[9, 0], gpu_name="h100", gpu_memory=80)
    assert "serve_env" not in plain.key_fields() and "vllm_env" not in plain.key_fields()
    with_env = ProbeRequest(
        sm=[9, 0], gpu_name="h100", gpu_memory=80, serve_env=dict(lint.serve_env), serve_argv=list(lint.serve_argv)
    )
    assert with_env.key_fields()["serve_env"] == {"VLLM_USE_DEEP_GEMM": "0"}
    monkeypatch.setenv("VLLM_USE_DEEP_GEMM", "1")  # inherited by the child: keyed too
    assert plain.key_fields()["vllm_env"] == {"VLLM_USE_DEEP_GEMM": "1"}
    echoed = serve_command(tmp_path, with_env, ["p"])
    assert "VLLM_USE_DEEP_GEMM=0 vllm serve" in echoed and "hf_secret" not in echoed
