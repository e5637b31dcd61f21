"""Usage errors are exit 2, before any probing (issue 15): unknown rule codes (with a "did you
mean"), a non-positive --probe-timeout, an --output that cannot be written, a --kv-cache-dtype
the probed vLLM does not accept; `-V`; and --select never lowers a rule's severity.

Linted through the real CLI with the seed failure's recorded probe report standing in for the
vLLM child (tests/support/recorded_cli.py); `probed` lists the probes started."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from mtplint import __version__
from mtplint.config.schema import LintSettings
from mtplint.config.usage import check_kv_cache_dtype, kv_cache_dtypes
from mtplint.core.errors import BadInput
from recorded_cli import case_checkpoint, mtplint, stand_in

DEMO = "dsv4-w4a16-bf16-mtp"
PATCHED = "dsv4-w4a16-bf16-mtp+draft-unquantized-mtp-block"  # same checkpoint: MTP001 causes nothing


@pytest.fixture
def seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = case_checkpoint(DEMO)
    return path, stand_in(monkeypatch, {path: DEMO}, tmp_path / "cache")


def _usage_error(capsys, path, *args) -> str:
    rc = mtplint(path, *args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert err and err[-1].startswith("mtplint: error: "), err
    return err[-1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--select", "MTP999"], "--select: unknown rule code 'MTP999'; did you mean MTP009"),
        (["--ignore", "MTP001,MTPX"], "--ignore: unknown rule code 'MTPX'"),
        (["--select", "load-error"], "did you mean MTP008 (load-error)?"),
        (["--probe-timeout", "-1"], "--probe-timeout must be a positive number of seconds, not -1.0"),
        (["--probe-timeout", "0"], "--probe-timeout must be a positive number of seconds"),
        (["--format", "json", "--output", "no-such-dir/r.json"], "directory no-such-dir does not exist"),
        (["--format", "json", "--output", "."], "--output is a directory"),
        (["--format", "json", "--format", "text", "--output", "r.json"], "give one --output per --format"),
        (["--kv-cache-dtype", "fp9"], "--kv-cache-dtype 'fp9' is not one the probed vLLM accepts; did you mean fp8"),
    ],
)
def test_usage_error_is_exit_2_before_the_probe(seed, capsys, args, says):
    path, probed = seed
    assert says in _usage_error(capsys, path, *args)
    assert probed == []
    assert not Path("r.json").exists()


def test_rule_codes_from_the_project_file_are_checked_too(seed, capsys):
    path, probed = seed
    Path("mtplint.toml").write_text('ignore = ["MTP0O1"]\n')
    # The closest codes first; later rules (MTP021) may follow them.
    assert "--ignore: unknown rule code 'MTP0O1'; did you mean MTP001 or MTP011" in _usage_error(capsys, path)
    assert probed == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_output_directory(seed, capsys):
    path, probed = seed
    Path("ro").mkdir()
    Path("ro").chmod(stat.S_IRUSR | stat.S_IXUSR)
    assert "not writable" in _usage_error(capsys, path, "--format", "json", "--output", "ro/r.json")
    assert probed == []


@pytest.mark.slow
def test_a_prefix_selects_and_valid_values_pass(seed, capsys):
    path, probed = seed
    assert mtplint(path, "--select", "mtp0", "--kv-cache-dtype", "fp8", "--probe-timeout", "30") == 1
    assert len(probed) == 1


def test_version_flags(capsys):
    for flag in ("-V", "--version"):
        assert mtplint(flag) == 0
        assert capsys.readouterr().out.strip() == f"mtplint, version {__version__}"


# ---- --select never lowers a severity ---------------------------------------------------------


def _mtp001_severity(path: Path, capsys, *args: str) -> tuple[int, str]:
    import json

    rc = mtplint(path, "--format", "json", "--output", "r.json", *args)
    capsys.readouterr()
    found = [f for f in json.loads(Path("r.json").read_text())["findings"] if f["code"] == "MTP001"]
    assert len(found) == 1
    return rc, found[0]["severity"]


@pytest.mark.slow
def test_select_keeps_a_real_error_an_error(seed, capsys):
    path, _ = seed
    assert _mtp001_severity(path, capsys) == (1, "error")
    # MTP002/MTP005, whose findings show the dead entry matters, are not evaluated: the entry
    # keeps its severity instead of reading "no consequence in this configuration".
    assert _mtp001_severity(path, capsys, "--select", "MTP001") == (1, "error")
    assert _mtp001_severity(path, capsys, "--ignore", "MTP002,MTP005") == (1, "error")


@pytest.mark.slow
def test_without_consequences_still_lowers_when_the_consequence_rules_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = case_checkpoint(PATCHED)
    stand_in(monkeypatch, {path: PATCHED}, tmp_path / "cache")
    # The patched draft loads: the dead entry causes nothing, and says so.
    assert _mtp001_severity(path, capsys, "--with-patches", "draft-unquantized-mtp-block") == (0, "warning")


# ---- --kv-cache-dtype choices -----------------------------------------------------------------


def test_kv_cache_dtypes_are_read_from_the_probed_vllm_without_importing_it(tmp_path):
    choices = kv_cache_dtypes(None)
    assert choices and {"auto", "fp8", "bfloat16"} <= set(choices)
    assert "vllm" not in sys.modules
    # Another interpreter (here: this environment behind a wrapper, as a release beside the pin
    # is run) is asked in a child process.
    other = tmp_path / "python"
    other.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    other.chmod(0o755)
    assert kv_cache_dtypes(str(other)) == choices


def test_kv_cache_dtype_is_accepted_when_the_choices_cannot_be_read(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    assert kv_cache_dtypes(str(broken)) is None
    check_kv_cache_dtype(LintSettings(kv_cache_dtype="fp9", vllm_python=str(broken)))  # no error: cannot tell
    with pytest.raises(BadInput, match="did you mean fp8"):
        check_kv_cache_dtype(LintSettings(kv_cache_dtype="fp9"))
    # A release provisioned on first use cannot be read before it exists: accepted here, the
    # probe answers for it.
    check_kv_cache_dtype(LintSettings(kv_cache_dtype="fp9", vllm_commit="0.29.0"))


def test_a_zero_on_the_command_line_is_a_value_given(seed, capsys, tmp_path):
    # 0 == False: it must still override the project file's value, and so reach validation.
    path, probed = seed
    (tmp_path / "mtplint.toml").write_text("probe-timeout = 30\n")
    assert "--probe-timeout must be a positive number of seconds, not 0.0" in _usage_error(
        capsys, path, "--probe-timeout", "0"
    )
    assert not probed


def test_ctrl_c_while_click_parses_is_exit_130(seed, capsys, monkeypatch):
    from mtplint.cli import app as cli

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt  # what a Ctrl-C inside click's parsing raises; click turns it into Abort

    monkeypatch.setattr(cli.main, "make_context", interrupted)
    assert mtplint(seed[0]) == 130
    assert capsys.readouterr().err.strip() == "mtplint: interrupted"


@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_command_named_after_its_options(tmp_path, capsys, command):
    # `mtplint --gpu h100 check -- ...` is `mtplint check --gpu h100 -- ...`: the command's name was
    # read as a checkpoint path ("./check: no such checkpoint directory", then one per word).
    missing = tmp_path / "missing"
    rc = mtplint("--gpu", "h100", command, *(["--", "vllm", "serve"] if command == "check" else []), missing)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [f"mtplint: error: {missing}: no such checkpoint directory"], err
