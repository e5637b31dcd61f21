"""ModelOpt's `X*` entries, which vLLM splits into `X` and `X.*` before matching
(ModelOptQuantConfigBase.apply_vllm_mapper): the entry as written is alive when either half
matches, so a half that names no module is no MTP001 dead entry."""

from __future__ import annotations

from mtplint.probe.report import ExclusionSection, Layer
from mtplint.view.exclusions import ModuleNames, dead_entries

HEAD = [Layer("draft", "lilicorr.token_proj"), Layer("draft", "lilicorr.out_head")]


def _section(entries):
    return ExclusionSection(attr="exclude_modules", matcher="direct", entries=entries)


def test_a_split_half_is_alive_through_its_other_half():
    # `*lilicorr*` as written: `*lilicorr` names no module, `*lilicorr.*` matches the head.
    section = _section({"*lilicorr": [], "*lilicorr.*": HEAD})
    assert dead_entries(None, section, ModuleNames(["lilicorr.token_proj"]), ["mtp"]) == ([], {})


def test_the_trailing_half_is_alive_through_the_exact_one():
    section = _section({"model.fc": [Layer("draft", "model.fc")], "model.fc.*": []})
    assert dead_entries(None, section, ModuleNames(["model.fc"]), ["mtp"]) == ([], {})
