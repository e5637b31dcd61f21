"""Reporter unit tests on hand-built RunResults (no probe, no checkpoint)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.core.findings import Finding, Fixes, Location, RunResult
from mtplint.core.probe_summary import ProbedVllm, ProbeSummary
from mtplint.core.run_inputs import RunInputs
from mtplint.engine.rule import RULE_DOCS_BASE, AppliesTo, Explanation, Rule, rule_doc_uri
from mtplint.reporters import FORMATS, render
from mtplint.reporters.github import escape_data, escape_property, render_github, write_step_summary
from mtplint.reporters.json_report import build_report, load_schema
from mtplint.reporters.junit import render_junit
from mtplint.reporters.lines import SourceLines, repo_prefix
from mtplint.reporters.sarif import build_sarif, fingerprint
from mtplint.reporters.text import render_text
from paths import ROOT

jsonschema = pytest.importorskip("jsonschema")

REPO = ROOT
# The published OASIS SARIF 2.1.0 schema (errata01), committed so these tests never skip.
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

SHARD = "model-00046-of-00046.safetensors"


def _rule(code, name, severity, summary):
    return Rule(
        code=code,
        name=name,
        severity=severity,
        summary=summary,
        explanation=Explanation(
            what=f"{summary}.",
            why="The draft fails to load.",
            example="GLM-5 NVFP4, layer 43.",
            fix="Exclude the MTP layer from quantization, or apply the runtime patch.",
        ),
        check="noop",
        references=["https://github.com/vllm-project/vllm/issues/37667"],
        applies_to=AppliesTo(architectures=["DeepseekV4ForCausalLM"]),
    )


RULES = {
    "MTP001": _rule(
        "MTP001", "mtp-layer-weights-present", "error", "MTP layer weights present for every predict layer"
    ),
    "MTP002": _rule("MTP002", "quantized-layer-fed-unquantized", "error", "Quantized MTP module built unquantized"),
    "MTP005": _rule("MTP005", "draft-weights-left-uninitialized", "error", "Every draft parameter receives a tensor"),
    "MTP007": _rule("MTP007", "fused-module-exclusion-mismatch", "warning", "Fused modules inherit shard exclusions"),
}


def _evaluated(*codes):
    return [
        {"code": c, "name": RULES[c].name, "severity": RULES[c].severity, "summary": RULES[c].summary} for c in codes
    ]


@pytest.fixture
def result() -> RunResult:
    cause = Finding(
        code="MTP002",
        name="quantized-layer-fed-unquantized",
        severity="error",
        message="model.layers.43.ffn.experts is NVFP4 on disk but vLLM builds it without a quant method.",
        location=Location(file=SHARD, tensor="model.layers.43.ffn.experts"),
        evidence={
            "exception": 'Traceback (most recent call last):\n  File "deepseek_mtp.py", line 211, in load_weights\n'
            "KeyError: 'model.layers.43.ffn.experts.w2_weight_packed'",
            "quant_method": "UnquantizedFusedMoEMethod",
            "on_disk": ["U8", "F8_E4M3", "F32", "F32", "F32", "F32"],
        },
        fixes=Fixes(patches=["mtp-inherit-quant"], artifact=["exclude-mtp-from-quant"]),
        key="model.layers.43.ffn.experts",
    )
    consequence = Finding(
        code="MTP005",
        name="draft-weights-left-uninitialized",
        severity="error",
        message="3 expert parameters of the draft would stay torch.empty: acceptance collapses to ~0%.",
        location=Location(file=SHARD, tensor="model.layers.43.ffn.experts.w13_weight"),
        evidence={"uninitialized": ["w13_weight", "w2_weight", "w13_weight_scale"]},
        fixes=Fixes(patches=["mtp-inherit-quant"], artifact=["exclude-mtp-from-quant"]),
        caused_by=cause.id,
        key="model.layers.43.ffn.experts.w13_weight",
    )
    warning = Finding(
        code="MTP007",
        name="fused-module-exclusion-mismatch",
        severity="warning",
        message=(
            "ignore lists q_proj, k_proj but not v_proj: the fused qkv_proj cannot\n"
            "inherit a single status (100% sure, 3:1)."
        ),
        location=Location(file="config.json", config_key="quantization_config.ignore"),
        evidence={"shards": {"q_proj": "ignored", "k_proj": "ignored", "v_proj": "quantized"}},
        fixes=Fixes(artifact=["complete-fused-exclusions"]),
        key="model.layers.43.self_attn.qkv_proj",
        basis="knowledge",
    )
    return RunResult(
        findings=[cause, warning, consequence],
        rules_evaluated=_evaluated("MTP001", "MTP002", "MTP005", "MTP007"),
        vllm=ProbedVllm("0.33.0", "4ba787ec9d1c2e0f7a6b5c4d3e2f1a0b9c8d7e6f"),
        inputs=RunInputs(
            path="/models/GLM-5-NVFP4",
            gpu="NVIDIA H100 80GB HBM3",
            sm="9.0",
            num_speculative_tokens=3,
            tensor_parallel_size=8,
            patches=(),
        ),
        probe=ProbeSummary(cached=False, seconds=41.5),
    )


@pytest.fixture
def clean() -> RunResult:
    return RunResult(
        findings=[],
        rules_evaluated=_evaluated("MTP001", "MTP002"),
        vllm=ProbedVllm("0.33.0", "4ba787ec9d"),
        inputs=RunInputs(path="org/model"),
    )


def _validator(schema: dict):
    # Use the draft the schema itself declares ($schema), whatever it is.
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# ---- render() dispatch ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders(result, fmt):
    assert render(result, fmt, RULES).strip()


def test_unknown_format_is_rejected(result):
    with pytest.raises(ValueError, match="unknown report format"):
        render(result, "yaml", RULES)


# ---- text -------------------------------------------------------------------------------------


def test_text_concise_layout(result):
    out = render_text(result, RULES)
    assert not ANSI.search(out)
    lines = out.splitlines()
    # One line per root cause (the consequence is counted, not printed), then its fixes.
    assert lines[0] == (
        f"/models/GLM-5-NVFP4/{SHARD}: MTP002 quantized-layer-fed-unquantized: "
        "model.layers.43.ffn.experts is NVFP4 on disk but vLLM builds it without a quant method. (+1 consequence)"
    )
    assert lines[1:3] == [
        "  fix: MTPLINT_PATCHES=mtp-inherit-quant vllm serve ...",
        "  fix: mtplint fix /models/GLM-5-NVFP4 --only exclude-mtp-from-quant",
    ]
    assert lines[3].startswith("/models/GLM-5-NVFP4/config.json: MTP007 fused-module-exclusion-mismatch: ")
    assert "MTP005" not in out and "KeyError" not in out  # evidence and consequences: --output-format full
    assert lines[-1] == (
        "2 root causes (1 error, 1 warning), 1 consequence; 3 findings in 3 rules; probed vLLM 0.33.0 (g4ba787ec9)"
    )


def test_text_full_layout(result):
    out = render_text(result, RULES, full=True)
    assert not ANSI.search(out)
    lines = out.splitlines()
    assert lines[0] == "Errors (1 root cause, +1 consequence)"
    assert any(ln.startswith("Warnings (1 root cause)") for ln in lines)
    assert lines[-1] == (
        "2 root causes (1 error, 1 warning), 1 consequence; 3 findings in 3 rules; probed vLLM 0.33.0 (g4ba787ec9)"
    )
    head = next(ln for ln in lines if "MTP002" in ln)
    assert head.strip().startswith(
        f"MTP002 quantized-layer-fed-unquantized  /models/GLM-5-NVFP4/{SHARD} (model.layers.43.ffn.experts)  "
    )
    # Traceback evidence is reduced to the exception line.
    assert "KeyError: 'model.layers.43.ffn.experts.w2_weight_packed'" in out
    assert "most recent call last" not in out
    assert "MTPLINT_PATCHES=mtp-inherit-quant vllm serve ..." in out
    assert "mtplint fix /models/GLM-5-NVFP4 --only exclude-mtp-from-quant" in out
    assert "basis: knowledge" in out


def test_text_nests_consequences_under_cause(result):
    lines = render_text(result, RULES, full=True).splitlines()
    cause = next(i for i, ln in enumerate(lines) if "MTP002 " in ln)
    child = next(i for i, ln in enumerate(lines) if "MTP005 " in ln)
    warnings = next(i for i, ln in enumerate(lines) if ln.startswith("Warnings"))
    assert cause < child < warnings
    indent = lambda s: len(s) - len(s.lstrip())  # noqa: E731
    assert indent(lines[child]) > indent(lines[cause])
    assert lines[child].lstrip().startswith("-> error MTP005")
    # Same fixes as its cause: not repeated under the consequence.
    assert sum("MTPLINT_PATCHES" in ln for ln in lines) == 1


def test_text_consequence_with_missing_cause_stays_visible(result):
    result.findings = [f for f in result.findings if f.code != "MTP002"]
    assert "Errors (1 root cause)" in render_text(result, RULES, full=True)
    assert "MTP005 draft-weights-left-uninitialized: " in render_text(result, RULES)


@pytest.mark.parametrize("full", [False, True])
def test_text_color(result, full):
    out = render_text(result, RULES, color=True, full=full)
    assert ANSI.search(out)
    assert ANSI.sub("", out) == render_text(result, RULES, color=False, full=full)


def test_text_clean_summary(clean):
    assert render_text(clean, RULES).strip() == "no findings in 2 rules; probed vLLM 0.33.0 (g4ba787ec9)"
    assert render_text(clean, RULES, full=True).strip() == "no findings in 2 rules; probed vLLM 0.33.0 (g4ba787ec9)"


# ---- json -------------------------------------------------------------------------------------


def test_json_validates_against_report_schema(result, clean):
    validator = _validator(load_schema())
    for res in (result, clean):
        doc = json.loads(render(res, "json", RULES))
        validator.validate(doc)
    doc = json.loads(render(result, "json", RULES))
    assert doc["schema"] == "mtplint/report/v1"
    assert doc["summary"] == {"error": 2, "warning": 1, "info": 0}
    assert doc["vllm"]["version"] == "0.33.0"
    assert [f["id"] for f in doc["findings"]] == [f.id for f in result.findings]
    assert doc["findings"][2]["caused_by"] == "MTP002:model.layers.43.ffn.experts"


def test_json_schema_rejects_bad_reports(result):
    validator = _validator(load_schema())
    doc = build_report(result)
    doc["findings"][0]["severity"] = "fatal"
    assert not validator.is_valid(doc)
    doc = build_report(result)
    del doc["summary"]
    assert not validator.is_valid(doc)


def test_json_survives_non_json_evidence(result):
    result.findings[0].evidence["paths"] = {Path("a"), Path("b")}
    result.inputs = result.inputs.replace(path=Path("/models/x"))  # type: ignore[arg-type]
    doc = build_report(result)
    assert doc["findings"][0]["evidence"]["paths"] == ["a", "b"]
    assert doc["inputs"]["path"] == "/models/x"


def test_documented_example_validates():
    doc = (REPO / "docs" / "report-json.md").read_text()
    example = re.search(r"## Example\s+```json\n(.*?)```", doc, re.S).group(1)
    _validator(load_schema()).validate(json.loads(example))


# ---- junit ------------------------------------------------------------------------------------


def _cases(xml: str):
    root = ET.fromstring(xml.encode())
    suite = root.find("testsuite")
    return suite, {tc.get("classname"): tc for tc in suite.iter("testcase")}


def test_junit_one_case_per_rule(result):
    suite, cases = _cases(render_junit(result, RULES))
    assert suite.get("name") == "/models/GLM-5-NVFP4"
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    assert set(cases) == {"mtplint.MTP001", "mtplint.MTP002", "mtplint.MTP005", "mtplint.MTP007"}
    assert cases["mtplint.MTP002"].get("name") == "MTP002 quantized-layer-fed-unquantized"
    assert list(cases["mtplint.MTP001"]) == []  # pass
    failure = cases["mtplint.MTP002"].find("failure")
    assert failure.get("type") == "error"
    assert "KeyError" in failure.text
    # Warning below fail_on: reported, not failed.
    assert cases["mtplint.MTP007"].find("failure") is None
    assert "v_proj" in cases["mtplint.MTP007"].find("system-out").text
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["vllm.version"] == "0.33.0"


def test_junit_fail_on_warning(result):
    suite, cases = _cases(render_junit(result, RULES, fail_on="warning"))
    assert suite.get("failures") == "3"
    assert cases["mtplint.MTP007"].find("failure").get("type") == "warning"


def test_junit_all_findings_of_a_rule_in_one_failure(result):
    extra = Finding(
        code="MTP002",
        name="quantized-layer-fed-unquantized",
        severity="error",
        message="model.layers.43.eh_proj is FP8 on disk but built as nn.Linear.",
        location=Location(file=SHARD, tensor="model.layers.43.eh_proj"),
        key="model.layers.43.eh_proj",
    )
    result.findings.append(extra)
    _, cases = _cases(render_junit(result, RULES))
    failures = cases["mtplint.MTP002"].findall("failure")
    assert len(failures) == 1
    assert "ffn.experts" in failures[0].text and "eh_proj" in failures[0].text
    assert failures[0].get("message").endswith("(+1 more)")


def test_junit_clean(clean):
    suite, _ = _cases(render_junit(clean, RULES))
    assert suite.get("tests") == "2" and suite.get("failures") == "0"


# ---- sarif ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    return _validator(json.loads(SARIF_SCHEMA.read_text()))


def test_sarif_validates(result, clean, sarif_validator):
    assert sarif_validator.META_SCHEMA["$schema"].startswith("http://json-schema.org/draft-04/")
    for res in (result, clean):
        sarif_validator.validate(json.loads(render(res, "sarif", RULES)))
    broken = build_sarif(result, RULES)
    broken["runs"][0]["results"][0]["level"] = "warn"  # proves the validator is really checking
    assert not sarif_validator.is_valid(broken)


def test_sarif_content(result):
    doc = build_sarif(result, RULES)
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mtplint" and driver["informationUri"]
    ids = [r["id"] for r in driver["rules"]]
    assert ids == ["MTP001", "MTP002", "MTP005", "MTP007"]  # every evaluated rule, fired or not
    for r in driver["rules"]:
        for field in ("shortDescription", "fullDescription"):
            assert 0 < len(r[field]["text"]) <= 1024
        assert r["help"]["text"] and r["help"]["markdown"] and r["helpUri"]
    assert driver["rules"][3]["defaultConfiguration"]["level"] == "warning"
    res = {r["ruleId"]: r for r in run["results"]}
    assert all(ids[r["ruleIndex"]] == r["ruleId"] for r in run["results"])
    cause = res["MTP002"]
    assert cause["level"] == "error"
    phys = cause["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": SHARD, "uriBaseId": "%SRCROOT%"}
    assert phys["region"]["startLine"] == 1
    assert cause["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "model.layers.43.ffn.experts"
    assert res["MTP007"]["locations"][0]["logicalLocations"][0]["kind"] == "property"
    child = res["MTP005"]
    assert child["properties"]["causedBy"] == "MTP002:model.layers.43.ffn.experts"
    assert child["relatedLocations"][0]["message"]["text"].startswith("Caused by MTP002")
    assert cause["properties"]["consequences"] == ["MTP005:model.layers.43.ffn.experts.w13_weight"]


def test_sarif_fingerprints_are_stable(result):
    first = [r["partialFingerprints"] for r in build_sarif(result, RULES)["runs"][0]["results"]]
    result.findings[0].message = "reworded"
    result.findings[0].evidence = {}
    second = [r["partialFingerprints"] for r in build_sarif(result, RULES)["runs"][0]["results"]]
    assert first == second
    assert len({fp["mtplint/v1"] for fp in first}) == len(first)
    assert fingerprint(result.findings[0]) == first[0]["mtplint/v1"]


def test_sarif_uri_prefix_and_config_line(result, tmp_path, sarif_validator):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["GlmMoeDsaForCausalLM"],
                "ignore": [],
                "quantization_config": {"quant_method": "compressed-tensors", "ignore": ["lm_head"]},
            },
            indent=2,
        )
    )
    result.inputs = result.inputs.replace(path=str(tmp_path))
    doc = build_sarif(result, RULES, uri_prefix="models/GLM 5/")
    sarif_validator.validate(doc)
    warn = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == "MTP007")
    phys = warn["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"]["uri"] == "models/GLM%205/config.json"
    # The nested quantization_config.ignore (line 8), not the top-level "ignore" (line 5).
    assert phys["region"]["startLine"] == 8


def test_sarif_rule_missing_from_rules_dict(result, sarif_validator):
    doc = build_sarif(result, {})
    sarif_validator.validate(doc)
    assert all(r["help"]["text"] for r in doc["runs"][0]["tool"]["driver"]["rules"])


def test_sarif_help_uris_point_at_the_committed_rule_pages(result, sarif_validator):
    from mtplint.engine.loader import load_rules

    rules = load_rules()
    result.rules_evaluated = [
        {"code": c, "name": r.name, "severity": r.severity, "summary": r.summary} for c, r in rules.items()
    ]
    doc = build_sarif(result, rules)
    sarif_validator.validate(doc)
    for descriptor in doc["runs"][0]["tool"]["driver"]["rules"]:
        uri = descriptor["helpUri"]
        assert uri == f"{RULE_DOCS_BASE}{descriptor['id']}.md"
        # https://github.com/mtplint/mtplint/blob/main/<path>: the page this checkout commits.
        assert (REPO / uri.removeprefix(RULE_DOCS_BASE.split("/blob/main/")[0] + "/blob/main/")).is_file(), uri
    assert rule_doc_uri("MTP999").startswith(RULE_DOCS_BASE)  # one base for every page


def test_rule_pages_are_up_to_date():
    """docs/rules/ is generated from rules/ (scripts/gen_rule_docs.py): a rule edit needs its page."""
    spec = importlib.util.spec_from_file_location("gen_rule_docs", REPO / "scripts" / "gen_rule_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.stale() == [], "run: python scripts/gen_rule_docs.py"
    page = (REPO / "docs" / "rules" / "MTP001.md").read_text()
    assert "# MTP001 exclusion-entry-matches-nothing" in page and "## Fix" in page


def test_sarif_automation_id_names_the_matrix_cell(result, sarif_validator):
    doc = build_sarif(result, RULES)
    sarif_validator.validate(doc)
    assert doc["runs"][0]["automationDetails"]["id"] == "mtplint/gpu=NVIDIA_H100_80GB_HBM3/tp=8/n=3/vllm=0.33.0/"
    result.inputs = result.inputs.replace(
        gpu="b200", tensor_parallel_size=1, pipeline_parallel_size=2, num_speculative_tokens=1
    )
    assert build_sarif(result, RULES)["runs"][0]["automationDetails"]["id"] == (
        "mtplint/gpu=b200/tp=1/pp=2/n=1/vllm=0.33.0/"
    )


def _dead_entry(entry: str, key: str = "quantization_config.ignore") -> Finding:
    return Finding(
        code="MTP001",
        name="exclusion-entry-matches-nothing",
        severity="error",
        message=f"entry '{entry}' matches nothing",
        location=Location(file="config.json", config_key=key),
        evidence={"matched_as": entry},
        key=entry,
    )


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A git repository holding a checkpoint at models/ckpt, linted from elsewhere."""
    ckpt = tmp_path / "repo" / "models" / "ckpt"
    ckpt.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    config = {"quantization_config": {"ignore": ["lm_head", "re:.*mtp.*", "model.layers.3.mlp"]}}
    (ckpt / "config.json").write_text(json.dumps(config, indent=2))
    monkeypatch.chdir(tmp_path)
    return ckpt


def test_sarif_and_annotations_are_relative_to_the_repository_and_on_the_entry(result, repo, sarif_validator):
    entry_line = 5  # {, "quantization_config": {, "ignore": [, "lm_head", "re:.*mtp.*"
    assert (repo / "config.json").read_text().splitlines()[entry_line - 1].strip() == '"re:.*mtp.*",'
    result.inputs = result.inputs.replace(path=str(repo))
    result.findings = [_dead_entry("re:.*mtp.*"), result.findings[0]]
    prefix = repo_prefix(repo)
    assert prefix == "models/ckpt"  # the git top level, not the working directory
    doc = build_sarif(result, RULES, uri_prefix=prefix)
    sarif_validator.validate(doc)
    dead, shard = (r["locations"][0]["physicalLocation"] for r in doc["runs"][0]["results"])
    assert dead == {
        "artifactLocation": {"uri": "models/ckpt/config.json", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": entry_line},
    }
    assert shard["artifactLocation"]["uri"] == f"models/ckpt/{SHARD}" and shard["region"]["startLine"] == 1
    annotations = render_github(result, RULES, uri_prefix=prefix).splitlines()
    assert annotations[0].startswith(f"::error file=models/ckpt/config.json,line={entry_line},title=MTP001 ")
    assert annotations[1].startswith(f"::error file=models/ckpt/{SHARD},title=MTP002 ")  # a shard has no line


def test_repo_root(repo, tmp_path):
    assert repo_prefix(repo, tmp_path / "repo" / "models") == "ckpt"
    assert repo_prefix(repo, repo) == ""
    with pytest.raises(BadInput, match="not inside it"):
        repo_prefix(repo, tmp_path / "elsewhere")
    plain = tmp_path / "plain" / "ckpt"  # no repository: relative to the working directory
    plain.mkdir(parents=True)
    assert repo_prefix(plain) == "plain/ckpt"
    assert repo_prefix("hf://org/model") == ""


def test_artifact_fix_command_of_a_hub_repository_writes_into_out():
    """A hub repository is never changed: its fix command needs --out (`mtplint fix` says so)."""
    from mtplint.reporters.common import artifact_command

    assert artifact_command("hf://org/m@abc123", "set-mtp-depth") == (
        "mtplint fix hf://org/m@abc123 --only set-mtp-depth --out DIR"
    )
    assert artifact_command("models/ckpt", "set-mtp-depth") == "mtplint fix models/ckpt --only set-mtp-depth"


def test_entry_declared_in_hf_quant_config(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["X"]}')
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head", "mtp*"]}}, indent=1)
    )
    finding = _dead_entry("mtp*", key="quantization.exclude_modules")
    assert SourceLines(tmp_path).locate(finding) == ("hf_quant_config.json", 6)
    assert SourceLines(tmp_path).locate(_dead_entry("x", key="nowhere.to_be_found")) == ("config.json", None)


# ---- github -----------------------------------------------------------------------------------


def test_github_escaping():
    assert escape_data("100% sure\r\nnext: a, b") == "100%25 sure%0D%0Anext: a, b"
    assert escape_property("dir:x,y/50%.json\n") == "dir%3Ax%2Cy/50%25.json%0A"


def test_github_annotations(result):
    result.findings[1].location.file = "weird:dir,v2/config.json"
    out = render_github(result, RULES)
    commands = [ln for ln in out.splitlines() if ln.startswith("::")]
    assert len(commands) == 3
    assert [c.split(" ", 1)[0] for c in commands] == ["::error", "::error", "::warning"]
    warning = commands[2]
    assert warning.startswith(
        "::warning file=weird%3Adir%2Cv2/config.json,title=MTP007 fused-module-exclusion-mismatch::"
    )
    data = warning.split("::", 2)[2]
    assert "\n" not in data and "%0A" in data and "100%25 sure" in data
    assert "q_proj, k_proj" in data  # commas and colons stay literal in message data
    assert "(consequence of MTP002)" in commands[1]
    info = Finding(
        code="MTP001",
        name="mtp-layer-weights-present",
        severity="info",
        message="ok",
        location=Location(file="config.json"),
    )
    result.findings = [info]
    assert render_github(result, RULES).startswith("::notice file=config.json,")


def test_github_uri_prefix(result):
    out = render(result, "github", RULES, uri_prefix="models/glm")
    assert f"file=models/glm/{SHARD}," in out


def test_step_summary(result, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert write_step_summary(result, RULES) is False
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert write_step_summary(result, RULES) is True
    text = target.read_text()
    assert text.startswith("earlier step\n")  # appended, not overwritten
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 1 + 3
    assert "MTP005" in rows[2] and "caused by" in rows[2]  # consequence right after its cause
    assert all(ln.count(" | ") == 4 for ln in rows)  # the newline in MTP007's message did not break the table


def test_step_summary_module_table(result):
    from mtplint.reporters.github import step_summary
    from mtplint.reporters.modules import ModuleRow

    rows = [
        ModuleRow("mtp.0.ffn.experts.* (772)", "bf16", "CompressedTensorsWNA16MoEMethod", "MTP002, MTP005"),
        ModuleRow("mtp.0.e_proj", "bf16", "unquantized", "ok"),
    ]
    text = step_summary(result, RULES, rows)
    table = text[text.index("### Draft modules") :].splitlines()
    assert table[2] == "| draft module | on disk | vLLM builds | outcome |"
    assert table[4] == "| mtp.0.ffn.experts.\\* (772) | bf16 | CompressedTensorsWNA16MoEMethod | MTP002, MTP005 |"
    assert "Draft modules" not in step_summary(result, RULES)
    full = render_text(result, RULES, full=True, modules=rows).splitlines()
    assert full[full.index("Draft modules") + 2].split() == [
        "mtp.0.ffn.experts.*",
        "(772)",
        "bf16",
        "CompressedTensorsWNA16MoEMethod",
        "MTP002,",
        "MTP005",
    ]
    assert "Draft modules" not in render_text(result, RULES, modules=rows)  # full output only


def _per_layer(code: str, layers: range, template: str) -> list[Finding]:
    return [
        Finding(
            code=code,
            name="unquantized-layer-fed-quantized",
            severity="error",
            message=template.format(i=i),
            key=f"target:model.layers.{i}.ffn.experts",
            location=Location(file=SHARD, tensor=f"layers.{i}.ffn.experts.0.w1.weight_packed"),
        )
        for i in layers
    ]


def test_text_prints_the_same_failure_in_every_layer_once(result):
    alike = _per_layer("MTP003", range(43), "model.layers.{i}.ffn.experts is built unquantized")
    result.findings = [*alike, result.findings[1]]
    text = render_text(result, full=True)
    assert text.count("MTP003 unquantized-layer-fed-quantized") == 1
    assert "(+42 more like it, differing only in numbers: " in text
    assert "layers.1.ffn.experts.0.w1.weight_packed" in text
    assert "Errors (43 root causes)" in text  # the count still says how many findings there are
    concise = render_text(result)
    assert concise.count("MTP003 unquantized-layer-fed-quantized") == 1
    assert "(+42 more like it, differing only in numbers)" in concise
    assert concise.splitlines()[-1].startswith("44 root causes (43 errors, 1 warning); 44 findings in 2 rules; ")
    assert len(json.loads(render(result, "json", RULES))["findings"]) == 44


def test_text_keeps_two_alike_findings_and_different_ones_apart(result):
    pair = _per_layer("MTP003", range(2), "model.layers.{i}.ffn.experts is built unquantized")
    other = _per_layer("MTP003", range(3), "model.layers.{i}.attn.wo_a is built unquantized")
    result.findings = pair + other
    for text in (render_text(result), render_text(result, full=True)):
        assert text.count("MTP003 unquantized-layer-fed-quantized") == 3  # both of the pair, one of the three
        assert "(+2 more like it" in text
