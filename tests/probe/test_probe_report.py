"""The typed probe report: every recorded report round-trips through from_json/to_json, and
from_json refuses a wrong shape with a message naming the first bad field (the probe cache
treats that as a miss, the runner as a probe failure)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import sys

import pytest
from mtplint.probe.report import (
    REPORT_SCHEMA,
    SCHEMA_VERSION,
    Decision,
    ErrorRecord,
    ExclusionSection,
    Frame,
    KernelCheck,
    Kernels,
    LoadError,
    LoadResult,
    ModelInfo,
    ParamInfo,
    PatchRecord,
    ProbeReport,
    Request,
    VllmIdentity,
    Wiring,
)
from paths import ROOT
from recorded_cases import load_cases, read_recorded

CASES = load_cases()
REPORT_PY = ROOT / "lint" / "probe" / "report.py"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
@pytest.mark.slow
def test_recorded_report_round_trips(case):
    data = read_recorded(case["id"])["report"]
    report = ProbeReport.from_json(data)
    assert report.schema == REPORT_SCHEMA
    assert report.to_json() == data
    assert json.loads(json.dumps(report.to_json())) == data


def sample() -> ProbeReport:
    """A small report with one of everything."""
    frame = Frame(file="vllm/model_executor/layers/linear.py", line=12, function="weight_loader", code="assert x")
    return ProbeReport(
        vllm=VllmIdentity(version="0.33.0", commit="abc"),
        request=Request(sm=[9, 0], gpu_name="NVIDIA H100 80GB HBM3", gpu_memory=80 << 30, patches=["p"]),
        stubbed_modules=["vllm._C"],
        patches=[PatchRecord(id="p", status="applied", replaced=["m:f"], details={"rebound_in": ["m2"]})],
        models={
            "target": ModelInfo(model_class="m.T", architecture="DeepseekV4ForCausalLM"),
            "draft": ModelInfo(model_class="m.D", architecture="DeepSeekV4MTP", n_predict=1),
        },
        draft_hf_config={"num_nextn_predict_layers": 1, "architectures": ["DeepSeekV4MTP"]},
        decisions=[
            Decision(
                model="draft",
                prefix="model.layers.43.ffn.experts",
                layer_class="FusedMoE",
                method="CompressedTensorsWNA16MoEMethod",
                scheme=None,
                module="model.layers.43.mtp_block.ffn.experts",
            )
        ],
        params={"draft": {"model.layers.43.enorm.weight": ParamInfo(shape=[7168], dtype="bfloat16", module_class="N")}},
        load={
            "target": LoadResult(),
            "draft": LoadResult(
                fed={"mtp.0.enorm.weight": ["model.layers.43.enorm.weight"]},
                errors=[LoadError(type="KeyError", message="'x'", frame=frame, tensor="mtp.0.ffn.experts.0.w1.weight")],
                loaded_params=["model.layers.43.enorm.weight"],
                params_loaded_by_loader=["model.layers.43.enorm.weight"],
                completeness_error=ErrorRecord(type="ValueError", message="missing layers"),
            ),
        },
        wiring=Wiring(proposer="vllm.P", steps=["_maybe_share_lm_head"], shared={"lm_head.weight": "lm_head.weight"}),
        exclusions=[ExclusionSection(attr="ignore", matcher="direct", entries={"re:.*mtp.*": []})],
        kernels=Kernels(
            next_n=2,
            uses_sparse_indexer=True,
            status="fallback",
            checks=[KernelCheck(predicate="vllm.p", next_n=2, result=False)],
        ),
        timings={"import": 1.5},
    )


def test_sample_round_trips():
    data = sample().to_json()
    assert ProbeReport.from_json(copy.deepcopy(data)) == sample()
    assert ProbeReport.from_json(json.loads(json.dumps(data))).to_json() == data


def _set(data: dict, path: list, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()
BAD = [
    # (where, new value, the message from_json gives)
    (["load"], _DELETE, "report.load: missing"),
    (["load", "draft", "params_hit"], [], "report.load['draft']: unknown field 'params_hit'"),
    (
        ["load", "draft", "errors", 0, "tensor"],
        3,
        "report.load['draft'].errors[0].tensor: expected str or null, got int",
    ),
    (
        ["load", "draft", "errors", 0, "frame", "line"],
        "12",
        "report.load['draft'].errors[0].frame.line: expected int or null",
    ),
    (
        ["load", "draft", "fed", "mtp.0.enorm.weight"],
        ["a", 1],
        "report.load['draft'].fed['mtp.0.enorm.weight'][1]: expected str, got int",
    ),
    (
        ["load", "draft", "completeness_error"],
        "boom",
        "report.load['draft'].completeness_error: expected ErrorRecord or null",
    ),
    (["params", "draft", "model.layers.43.enorm.weight", "shape"], [7168, True], "shape[1]: expected int, got bool"),
    (["decisions", 0, "prefix"], None, "report.decisions[0].prefix: expected str, got null"),
    (["request", "elide"], "yes", "report.request.elide: expected bool, got str"),
    (["kernels", "status"], None, "report.kernels.status: expected 'not-applicable' | 'native'"),
    (["kernels", "status"], "fast", "'unknown', got 'fast'"),
    (["wiring", "shared"], [], "report.wiring.shared: expected object, got list"),
    (["exclusions", 0, "consulted"], {"draft:x": 1}, "report.exclusions[0].consulted['draft:x']: expected str or null"),
    (["exclusions", 0, "consulted"], {"x": "y"}, "report.exclusions[0].consulted: key 'x' is not 'model:prefix'"),
    (["exclusions", 0, "entries", "e"], ["x"], "report.exclusions[0].entries['e'][0]: expected 'model:prefix' string"),
    (["models"], [], "report.models: expected object, got list"),
    (["patches", 0], "p", "report.patches[0]: expected PatchRecord object, got str"),
    (["schema"], "mtplint/probe/v1", "report.schema: 'mtplint/probe/v1', expected"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD, ids=[m.split(":")[0] for _p, _v, m in BAD])
def test_from_json_names_the_bad_field(path, value, message):
    data = _set(sample().to_json(), path, value)
    with pytest.raises(ValueError) as info:
        ProbeReport.from_json(data)
    assert message in str(info.value)


@pytest.mark.parametrize("value", [None, [], "report", 2])
def test_from_json_refuses_what_is_no_object(value):
    with pytest.raises(ValueError, match=r"^report: expected ProbeReport object"):
        ProbeReport.from_json(value)


def test_one_schema_version():
    assert f"mtplint/probe/v{SCHEMA_VERSION}" == REPORT_SCHEMA
    assert ProbeReport(vllm=VllmIdentity(None, None), request=sample().request).schema == REPORT_SCHEMA


def test_report_module_needs_only_the_standard_library():
    """The probe child imports it inside vLLM environments that have no mtplint dependencies."""
    tree = ast.parse(REPORT_PY.read_text())
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported, "no imports found: the test reads the wrong file"
    not_stdlib = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names | {"__future__"}}
    assert not not_stdlib


def test_context_answers_from_the_report():
    from mtplint.checks.context import Context

    report = sample()
    report.construction_errors = {}
    ctx = Context(None, report, {})  # type: ignore[arg-type]  # these questions need no inventory
    assert ctx.built_ok("draft") and ctx.built_ok("target") and ctx.every_model_built
    assert [(m, e.tensor) for m, e in ctx.load_errors()] == [("draft", "mtp.0.ffn.experts.0.w1.weight")]
    assert ctx.load_errors("target") == []
    # The module a failing tensor was headed for: the loader's parameter, the parameter a
    # KeyError names, or the tensor's own module where the draft has one of that path.
    assert ctx.error_module("draft", LoadError(type="AssertionError", message="", param="a.b.weight")) == "a.b"
    missing = LoadError(type="KeyError", message="'model.layers.43.enorm.bias'")
    assert ctx.error_module("draft", missing) == "model.layers.43.enorm"
    shape = LoadError(type="AssertionError", message="shape", tensor="model.layers.43.enorm.weight")
    assert ctx.error_module("draft", shape) == "model.layers.43.enorm"
    assert ctx.error_module("draft", LoadError(type="AssertionError", message="", tensor="elsewhere.w")) is None
    assert ctx.param_initialized("draft", "model.layers.43.enorm.weight")
    assert ctx.replaced_functions() == {"m:f"}
    report.load.pop("target")
    report.construction_errors = {"target": ErrorRecord(type="ValueError", message="no")}
    ctx = Context(None, report, {})  # type: ignore[arg-type]
    assert not ctx.built_ok("target") and not ctx.every_model_built
    assert [m for m, _e in ctx.construction_errors()] == ["target"]


def test_layers_are_typed_in_memory_and_model_prefix_text_in_json():
    data = sample().to_json()
    data["exclusions"][0]["entries"] = {"re:.*mtp.*": ["draft:model.layers.61.mlp.experts"]}
    data["exclusions"][0]["consulted"] = {"target:model.layers.3.mlp.experts": "model.layers.3.mlp.experts"}
    report = ProbeReport.from_json(data)
    (layer,) = report.exclusions[0].entries["re:.*mtp.*"]
    assert (layer.model, layer.prefix) == ("draft", "model.layers.61.mlp.experts")
    assert report.exclusions[0].consulted == {("target", "model.layers.3.mlp.experts"): "model.layers.3.mlp.experts"}
    assert report.to_json()["exclusions"][0] == data["exclusions"][0]


def test_the_child_request_is_typed_and_round_trips():
    from mtplint.probe.report import ChildRequest

    modelled = sample().request
    req = ChildRequest(**dataclasses.asdict(modelled), config_dir="/tmp/c", tensors_file="/tmp/t.json")
    again = ChildRequest.from_json(json.loads(json.dumps(req.to_json())))
    assert again == req and again.modelled() == modelled and again.draft_config_dir is None
    bad = {**req.to_json(), "tensor_parallel_size": "8"}
    with pytest.raises(ValueError, match=r"request\.tensor_parallel_size: expected int, got str"):
        ChildRequest.from_json(bad)
    with pytest.raises(ValueError, match=r"unknown field 'tp'"):
        ChildRequest.from_json({**req.to_json(), "tp": 8})
