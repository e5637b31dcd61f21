"""A fix id is declared once, in the rule file: the fixer registers what the rules declare, a
check may only narrow a finding to fixes its rule declares (checked when rules load), and a hit
that names another is an mtplint bug, never a fix dropped in silence."""

from __future__ import annotations

import pytest
from mtplint.checks import REGISTRY, CheckSpec, check
from mtplint.checks.context import Hit
from mtplint.core.errors import MtplintError
from mtplint.core.findings import Location
from mtplint.engine.evaluate import artifact_fixes
from mtplint.engine.loader import RuleFileError, load_rules, parse_rule
from mtplint.fixer.catalog import FIXES
from paths import ROOT

RULES = ROOT / "rules"


def test_every_declared_artifact_fix_is_registered_and_every_registered_fix_declared():
    declared = {fid for rule in load_rules().values() for fid in rule.fixes["artifact"]}
    assert declared == set(FIXES)


def test_every_fix_a_check_names_is_declared_by_each_rule_running_it():
    for rule in load_rules().values():
        assert REGISTRY[rule.check].fixes <= set(rule.fixes["artifact"]), rule.code


def test_a_check_naming_an_undeclared_fix_fails_when_rules_load():
    text = (RULES / "MTP015.toml").read_text()
    name = next(line.split('"')[1] for line in text.splitlines() if line.startswith("check"))
    spec = REGISTRY[name]
    assert "index-unindexed-shards" in spec.fixes
    without = text.replace('artifact = ["index-unindexed-shards"]', "artifact = []")
    assert without != text
    with pytest.raises(RuleFileError, match="index-unindexed-shards"):
        parse_rule(without, "MTP015.toml", {name: spec})
    parse_rule(text, "MTP015.toml", {name: spec})  # as shipped: loads


def _hit(artifact_fixes: list[str]) -> Hit:
    return Hit(
        key="k", fields={}, location=Location(file="model.safetensors.index.json"), artifact_fixes=artifact_fixes
    )


def test_a_hit_naming_an_undeclared_fix_is_an_internal_error():
    rule = load_rules()["MTP015"]
    assert artifact_fixes(rule, _hit(["index-unindexed-shards"])) == ["index-unindexed-shards"]
    assert artifact_fixes(rule, _hit([])) == []
    with pytest.raises(MtplintError, match="set-mtp-depth"):
        artifact_fixes(rule, _hit(["set-mtp-depth"]))


def test_the_decorator_records_the_fixes_a_check_may_name():
    @check(fields=("x",), fixes=("set-mtp-depth",))
    def _probe_only_check_for_this_test(ctx, options):  # pragma: no cover - never run
        return []

    try:
        spec = REGISTRY["_probe_only_check_for_this_test"]
        assert isinstance(spec, CheckSpec) and spec.fixes == frozenset({"set-mtp-depth"})
    finally:
        del REGISTRY["_probe_only_check_for_this_test"]
