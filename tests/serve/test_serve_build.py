"""Serve flags that change what vLLM builds or loads, replayed through the real probe
(lint/probe/child: expert_parallel.py, runtime_shim.computed_on_cpu, online quantization in
dryrun.py, the parallel groups in construct.py): expert parallelism, online quantization of
an unquantized checkpoint, --hf-overrides, DP/DCP/PP and multi-node flags.

Each command is linted on its family's official layout and must lint clean (vLLM serves it);
a broken layout under the same flags keeps the findings it has without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MTPLINT = [sys.executable, "-m", "mtplint"]
MTP1 = ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']

pytestmark = [pytest.mark.probe, pytest.mark.slow]


def _check(tmp_path: Path, recipe: str, flags: list[str], timeout: float = 900) -> tuple[int, dict, str]:
    from fixtures.build import cached_build

    out = tmp_path / "report.json"
    argv = [*MTPLINT, "check", "--no-cache", "--format", "json", "--output", str(out), "-q", "--", "vllm", "serve"]
    proc = subprocess.run(
        [*argv, str(cached_build(recipe)), *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    report = json.loads(out.read_text()) if out.is_file() else {}
    return proc.returncode, report, proc.stderr


def _findings(report: dict) -> list[tuple[str, str]]:
    return sorted((f["code"], f["message"]) for f in report["findings"])


def test_expert_parallel_on_an_official_layout_lints_clean(tmp_path):
    """-ep built torch.nonzero() over a meta expert map (MTP009 for target and draft); the map
    is the CPU data vLLM computes, and the experts of ranks 1..3 are read by their rank."""
    rc, report, err = _check(tmp_path, "glm45-air-bf16-official", ["--tensor-parallel-size", "4", *MTP1, "-ep"])
    assert rc == 0, (err, _findings(report))
    assert report["findings"] == []


def test_expert_parallel_keeps_the_findings_of_the_mtp_experts(tmp_path):
    """Under EP the MTP block's experts are still loaded and judged: a layout whose BF16 MTP
    experts are built NVFP4 fails the same way with and without -ep."""
    recipe = "glm45-air-ct-nvfp4-bf16mtp"
    _, plain, _ = _check(tmp_path, recipe, ["--tensor-parallel-size", "4", *MTP1])
    rc, with_ep, err = _check(tmp_path, recipe, ["--tensor-parallel-size", "4", *MTP1, "--enable-expert-parallel"])
    assert rc == 1, err
    assert _findings(with_ep) == _findings(plain)
    assert any(f["code"] == "MTP002" and ".mlp.experts" in f["message"] for f in with_ep["findings"])


def test_online_fp8_of_a_bf16_checkpoint_lints_clean(tmp_path):
    """The ERNIE-4.5 recipe's `--quantization fp8` on the BF16 checkpoint: vLLM builds every
    layer's BF16 weight on meta, buffers its loads and quantizes once the layer is complete. The
    probe materialized that layer on the CPU and failed to copy into it (118 MTP002, 2 MTP005,
    an MTP006 and `mtplint fix` suggestions for a checkpoint that serves fine)."""
    flags = ["--tensor-parallel-size", "8", "--gpu-memory-utilization=0.95", "--quantization", "fp8"]
    flags += ["--speculative-config", '{"method": "ernie_mtp", "num_speculative_tokens": 1}']
    rc, report, err = _check(tmp_path, "ernie45-moe-bf16-official", flags)
    assert rc == 0, (err, _findings(report))
    assert report["findings"] == []


@pytest.mark.parametrize("method", ["fp8_per_block", "int8_per_channel_weight_only"])
def test_other_online_methods_lint_clean(tmp_path, method):
    """fp8_per_block: 192 findings before; int8_per_channel_weight_only: an MTP016 info about
    a checkpoint exclusion list that does not exist (the checkpoint declares no quantization)."""
    rc, report, err = _check(
        tmp_path, "glm45-air-bf16-official", ["--tensor-parallel-size", "4", *MTP1, "--quantization", method]
    )
    assert rc == 0, (err, _findings(report))
    assert report["findings"] == []


def test_online_fp8_keeps_the_findings_of_a_broken_bf16_layout(tmp_path):
    """A BF16 layout whose config understates the KV heads is as broken quantized online as it
    is served in BF16: the same findings (the buffered loads are the checkpoint's loads, each
    counted once though vLLM replays them into the materialized layer)."""
    recipe = "mimo-bf16-kv-heads-understated"
    _, plain, _ = _check(tmp_path, recipe, ["--trust-remote-code"])
    rc, online, err = _check(tmp_path, recipe, ["--trust-remote-code", "--quantization", "fp8"])
    assert rc == 1, err
    assert _findings(online) == _findings(plain)
    assert {code for code, _ in _findings(online)} == {"MTP023"}


class _Listener:
    """A local listening socket that records every connection made to it: the address a
    command names for its rendezvous (a port outside the probe's own loopback range)."""

    def __init__(self) -> None:
        import socket
        import threading

        while True:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            if sock.getsockname()[1] >= 40000:  # the probe's own group takes 20000-39999
                break
            sock.close()
        sock.listen(8)
        self.sock, self.port, self.accepted = sock, sock.getsockname()[1], []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    "flags",
    [
        ["--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", "{port}", "--headless"],
        ["-dp", "2", "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", "{port}", "-ep"],
    ],
    ids=["multi-node", "dp-address"],
)
def test_rendezvous_flags_open_no_connection_and_wait_for_no_peer(tmp_path, flags):
    """vLLM joins the deployment's rendezvous (--master-addr/--master-port of a node, the DP
    master) when it sets up its process groups: the probe waited for the peers until
    --probe-timeout, then exit 3. It is the one rank, on loopback: no connection to the
    address the command names, and an answer in seconds, not at the timeout."""
    import time

    listener = _Listener()
    try:
        argv = [f.format(port=listener.port) for f in flags]
        started = time.monotonic()
        rc, report, err = _check(tmp_path, "glm45-air-bf16-official", ["-tp", "4", *MTP1, *argv], timeout=600)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert listener.accepted == []
    assert rc == 0, (err, _findings(report) if report else None)
    assert took < 300, took  # far below the 600 s the rendezvous waited


def test_data_parallel_shards_experts_over_dp_times_tp(tmp_path):
    """-dp 2 -tp 4 without EP: vLLM shards each expert over the 8 ranks (DP x TP), so rank 0
    loads 1/8 of it, which is no truncation (MTP023 read it as one at TP 4)."""
    rc, report, err = _check(tmp_path, "glm45-air-bf16-official", ["-tp", "4", "-dp", "2", *MTP1])
    assert rc == 0, (err, _findings(report))
    assert report["findings"] == []


def test_decode_context_parallel_builds_its_attention(tmp_path):
    """-dcp 8 on DeepSeek-V3 (MLA): the attention asks whether its DCP group is on one node (a
    collective whose answer it reads), which failed on meta (MTP009 for target and draft). The
    official layout keeps only the findings it has without DCP."""
    recipe = "dsv3-fp8-official"
    _, plain, _ = _check(tmp_path, recipe, ["-tp", "8", *MTP1])
    rc, dcp, err = _check(tmp_path, recipe, ["-tp", "8", "-dcp", "8", *MTP1])
    assert rc == 0, (err, _findings(dcp))
    assert _findings(dcp) == _findings(plain)


def test_expert_parallel_over_fused_expert_tensors(tmp_path):
    """Step-3.5-Flash stores each layer's experts fused in one 3-D tensor: under DP4 + EP rank 0
    loads its 72 of 288 experts from it, which is its share, not a truncation (3 MTP023)."""
    rc, report, err = _check(
        tmp_path,
        "step3p5-bf16-official",
        ["--data-parallel-size", "4", "--enable-expert-parallel", "--trust-remote-code"],
    )
    assert rc == 0, (err, _findings(report))
