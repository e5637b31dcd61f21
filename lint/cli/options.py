"""What every probing command's command line shares: the probe options (progress lines: lint/core/progress.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

# The options every probing command takes, in the order --help lists them.
_PROBE_OPTIONS = (
    click.option(
        "--vllm-commit",
        help="vLLM release or commit to probe (0.31.0, 2cf0a6915); provisioned on first use [the pinned one].",
    ),
    click.option("--vllm-source", type=click.Path(path_type=Path), help="vLLM git checkout --vllm-commit names."),
    click.option("--vllm-python", type=click.Path(path_type=Path), help="Python interpreter of the vLLM to probe."),
    click.option("-n", "--num-speculative-tokens", type=click.IntRange(1, 64), help="Draft tokens per step [1]."),
    click.option("--gpu", help="GPU model (h100, h200, b200, gb200, gb10, ...) [h100]."),
    click.option("--sm", help="Compute capability MAJOR.MINOR instead of --gpu."),
    click.option(
        "--tp",
        "--tensor-parallel-size",
        "tensor_parallel_size",
        type=click.IntRange(1, 1024),
        help="Tensor-parallel size [1].",
    ),
    click.option(
        "--pp",
        "--pipeline-parallel-size",
        "pipeline_parallel_size",
        type=click.IntRange(1, 64),
        help="Pipeline-parallel size [1]; the draft is modelled on the last stage.",
    ),
    click.option("--kv-cache-dtype", help="vLLM --kv-cache-dtype (changes construction for some models)."),
    click.option("--probe-timeout", type=float, help="Seconds before the probe is killed [600]."),
    click.option(
        "--probe-memory",
        metavar="SIZE",
        help="Memory the probe may hold before it is killed, e.g. 8GiB (or MTPLINT_PROBE_MEMORY) [8GiB].",
    ),
    click.option("--no-cache", is_flag=True, help="Probe again even when a cached report exists."),
    click.option(
        "--trust-remote-code",
        is_flag=True,
        help="Let the probe run the checkpoint's configuration code (auto_map), as vLLM would.",
    ),
    click.option(
        "--no-elision",
        is_flag=True,
        help="Feed every expert tensor to load_weights (slower; default elides identical ones).",
    ),
    click.option("-q", "--quiet", is_flag=True, help="No progress output."),
    click.option("--debug", is_flag=True, help="Show tracebacks and the probe's stderr tail."),
)


def probe_options(fn: Callable) -> Callable:
    for option in reversed(_PROBE_OPTIONS):
        fn = option(fn)
    return fn
