"""The probe's runtime shim (lint/probe/child/runtime_shim.py), in a child process: it patches
torch and vLLM globally, which must not leak into the test process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

_CHILD = """
import inspect, torch
from mtplint.probe.child import runtime_shim
runtime_shim.install_native_stubs()
runtime_shim.install_op_fallbacks()
# What 0.10-0.11 do while fp8_utils imports: the predicate's answer becomes a default argument
# of a function registered as a custom op, whose schema torch infers from the signature.
supported = torch.ops._C.cutlass_scaled_mm_supports_block_fp8(90)
def apply(x: torch.Tensor, cutlass_block_fp8_supported: bool = supported) -> torch.Tensor:
    return x
torch.library.infer_schema(apply, mutates_args=())
print(type(supported).__name__, supported, type(torch.ops._C.cutlass_group_gemm_supported(90)).__name__)
# Any other native op stays an inert stand-in (callable, falsy).
print(type(torch.ops._C.machete_supported_schedules()).__name__, bool(torch.ops._C.rms_norm))
"""


def test_a_native_capability_predicate_answers_a_real_false():
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["bool", "False", "bool", "_Inert", "False"], proc.stdout
