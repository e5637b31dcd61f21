"""Settings in two parts (issue 34): LintSettings, what decides a lint's findings (the key a
remembered verdict is stored under, the Python API's keywords), and OutputSettings, how the
findings are shown or acted on (the command line's). Settings holds both; the settings files and
the command line spell every option as before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mtplint
import pytest
from mtplint.api import options, settings_options
from mtplint.config.schema import FIELDS, FILE_KEYS, LintSettings, OutputSettings, Settings
from mtplint.config.settings import load_settings

LINT = {f.name for f in dataclasses.fields(LintSettings)}
OUTPUT = {f.name for f in dataclasses.fields(OutputSettings)}
DERIVED = {f.name for f in dataclasses.fields(LintSettings) if f.metadata["derived"]}


def test_the_apis_keywords_are_exactly_the_lint_settings_a_caller_gives():
    assert set(options()) == (LINT - DERIVED) | {"with_patches"}  # with_patches: --with-patches' spelling
    for name in LINT - DERIVED:
        assert settings_options({name: None}) == {"quiet": True}  # known: None is "not given"


@pytest.mark.parametrize("name", sorted(OUTPUT))
def test_an_output_option_is_no_keyword_of_the_api(tmp_path, name):
    with pytest.raises(TypeError, match=rf"unknown option\(s\) {name};"):
        mtplint.lint(tmp_path, **{name: True})


def test_every_setting_lives_in_one_part():
    assert not LINT & OUTPUT
    assert set(FIELDS) == LINT | OUTPUT
    assert [f.name for f in dataclasses.fields(Settings)] == ["lint", "output"]


def test_settings_files_spell_their_keys_as_before():
    # A settings file sets only what decides findings, under the keys users already write.
    assert FILE_KEYS == {
        "num-speculative-tokens": "num_speculative_tokens",
        "gpu": "gpu",
        "sm": "sm",
        "tensor-parallel-size": "tensor_parallel_size",
        "pipeline-parallel-size": "pipeline_parallel_size",
        "kv-cache-dtype": "kv_cache_dtype",
        "select": "select",
        "ignore": "ignore",
        "fail-on": "fail_on",
        "with-patches": "patches",
        "probe-timeout": "probe_timeout",
        "probe-memory": "probe_memory",
        "vllm-commit": "vllm_commit",
        "vllm-python": "vllm_python",
        "vllm-source": "vllm_source",
        "trust-remote-code": "trust_remote_code",
        "serve-args-file": "serve_args_file",
        "suppress": "suppress",
    }
    assert set(FILE_KEYS.values()) <= LINT


def test_output_options_leave_the_lint_settings_equal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("ckpt").mkdir()
    plain = load_settings(Path("ckpt"), {"gpu": "h100", "with_patches": "p1"})
    shown = load_settings(
        Path("ckpt"),
        {"gpu": "h100", "with_patches": "p1", "verbose": True, "formats": ("json",), "quiet": True, "dry_run": True},
    )
    assert shown.lint == plain.lint and shown.lint.patches == ("p1",)
    assert (shown.output.full, shown.output.formats, shown.output.quiet, shown.output.dry_run) == (
        True,
        ("json",),
        True,
        True,
    )
    assert plain.output == OutputSettings()


def test_replace_changes_the_part_that_holds_each_field():
    s = Settings().replace(gpu="b200", quiet=True)
    assert (s.lint.gpu, s.output.quiet) == ("b200", True)
    assert s.lint == LintSettings(gpu="b200") and s.output == OutputSettings(quiet=True)
    with pytest.raises(TypeError, match="not a setting: nonsense"):
        Settings().replace(nonsense=1)
    with pytest.raises(TypeError, match="not a setting: nonsense"):
        Settings.of(gpu="h100", nonsense=1)
