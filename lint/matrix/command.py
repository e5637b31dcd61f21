"""`mtplint matrix PATH --vllm-commit A,B [-n 1,2,3] [--gpu h100,b200] [--tp 1,8]`.

Exit codes: 0 no cell has a finding at or above --fail-on, 1 some cell has, 2 bad input or
usage, 3 internal or probe failure. Wired into the CLI by cli.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..config.settings import Options
from ..core.errors import EXIT_FINDINGS, EXIT_OK, BadInput
from ..core.exit_guard import guarded
from ..core.progress import progress_reporter
from ..pipeline.draft import check_usage as check_draft_usage


def default_jobs() -> int:
    """Both of a small machine's cores, four on a larger one: a cell's probe is one process
    of ~0.5-1.5 GiB, and past four the workers' imports and the checks crowd each other."""
    return max(1, min(os.cpu_count() or 1, 4))


def _list(value: str | None, kind: type = str) -> list[Any] | None:
    if not value:
        return None
    items = [x.strip() for x in value.split(",") if x.strip()]
    try:
        return list(dict.fromkeys(kind(x) for x in items))
    except ValueError:
        raise BadInput(f"not a comma-separated list of {kind.__name__}s: {value!r}") from None


@click.command("matrix")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--vllm-commit", "vllm_axis", help="vLLM releases or commits, comma-separated [the pinned one].")
@click.option("-n", "--num-speculative-tokens", "n_axis", help="Draft tokens per step, comma-separated [1].")
@click.option("--gpu", "gpu_axis", help="GPU models, comma-separated [h100].")
@click.option("--tp", "--tensor-parallel-size", "tp_axis", help="Tensor-parallel sizes, comma-separated [1].")
@click.option("--vllm-source", type=click.Path(path_type=Path), help="vLLM git checkout the commits belong to.")
@click.option("--pp", "--pipeline-parallel-size", "pipeline_parallel_size", type=click.IntRange(1, 64))
@click.option("--kv-cache-dtype", help="vLLM --kv-cache-dtype.")
@click.option("--format", "formats", multiple=True, type=click.Choice(["text", "json", "junit"]), help="[text]")
@click.option("--output", "outputs", multiple=True, type=click.Path(path_type=Path), help="File per --format.")
@click.option("--select", help="Only these rule codes or prefixes (comma-separated).")
@click.option("--ignore", "ignore_codes", help="Skip these rule codes or prefixes (comma-separated).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), help="Lowest severity that fails [error].")
@click.option("--probe-timeout", type=float, help="Seconds before one cell's probe is killed [600].")
@click.option("--no-cache", is_flag=True, help="Probe every cell again.")
@click.option("--trust-remote-code", is_flag=True, help="Let the probe run the checkpoint's configuration code.")
@click.option(
    "--draft", metavar="PATH", help="A draft served from its own checkpoint, linted against PATH in every cell."
)
@click.option("--method", metavar="METHOD", help="Speculative method of --draft [read from the draft].")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 64),
    help="Cells probed at once [the CPU count, at most 4; each probe holds up to ~1.5 GiB]; with --cluster, per node.",
)
@click.option(
    "--cluster",
    metavar="ADDRESS",
    help="Run the cells as Ray tasks on this Ray cluster (auto, HOST:PORT, ray://HOST:PORT); needs mtplint[cluster].",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
@click.option("--debug", is_flag=True, help="Show tracebacks and the probe's stderr tail.")
def matrix_cmd(paths: tuple[Path, ...], **opts: Any) -> None:
    """Lint each PATH for every combination of vLLM and deployment inputs, in one report."""
    sys.exit(guarded(lambda: _matrix(list(dict.fromkeys(paths)), opts), bool(opts.get("debug"))))


# The matrix's own options; the others are Settings.
_MATRIX_ONLY = ("jobs", "vllm_axis", "n_axis", "gpu_axis", "tp_axis", "cluster")


def _matrix(paths: list[Path], opts: Options) -> int:
    from ..core.findings import SEVERITY_RANK
    from ..pipeline.session import lint, provision
    from .cells import run_catalogue
    from .render import RENDERERS

    address = opts.get("cluster")
    if address is not None and not str(address).strip():
        raise BadInput("--cluster: give a Ray address (auto, HOST:PORT or ray://HOST:PORT)")
    targets = [_target(path, opts) for path in paths]
    s = targets[0].settings
    formats = list(s.output.formats or ["text"])
    outputs = list(s.output.outputs)
    if outputs and len(outputs) != len(formats):
        raise BadInput("give one --output per --format")
    progress = progress_reporter(s.output.quiet)
    if address is not None:
        from .cluster import run_on_cluster

        cells = run_on_cluster(targets, str(address), progress, jobs=opts.get("jobs"))
    else:
        cells = run_catalogue(
            targets,
            lambda p, cs, inv, prog: lint(p, cs, progress=prog, inventory=inv),
            progress,
            jobs=opts.get("jobs") or default_jobs(),
            prepare=provision,
        )
    for i, fmt in enumerate(formats):
        text = RENDERERS[fmt](cells, s.lint.fail_on)
        out = outputs[i] if outputs else None
        if out is None or str(out) == "-":
            click.echo(text, nl=not text.endswith("\n"))
        else:
            out.write_text(text)
    worst = max((SEVERITY_RANK[f.severity] for c in cells for f in c.findings), default=-1)
    return EXIT_FINDINGS if worst >= SEVERITY_RANK[s.lint.fail_on] else EXIT_OK


def _target(path: Path, opts: Options) -> Any:
    """One PATH: its settings (its own mtplint.toml may describe the deployment), its axes and
    its inventory, read and checked before any cell runs (bad input is exit 2 up front)."""
    from ..config.settings import load_and_announce
    from ..pipeline.session import read_once
    from .cells import Target

    axes_given = {
        "vllm": _list(opts.get("vllm_axis")),
        "n": _list(opts.get("n_axis"), int),
        "gpu": _list(opts.get("gpu_axis")),
        "tp": _list(opts.get("tp_axis"), int),
    }
    s = load_and_announce(path, {k: v for k, v in opts.items() if k not in _MATRIX_ONLY})
    check_draft_usage(s.lint, 1)
    defaults = {"vllm": s.lint.vllm_commit, "n": s.lint.num_speculative_tokens, "gpu": s.lint.gpu}
    defaults["tp"] = s.lint.tensor_parallel_size
    axes = {k: v or [defaults[k]] for k, v in axes_given.items()}
    if axes_given["gpu"]:
        s = s.replace(sm=None)  # a GPU axis replaces a --sm from the project file
    inventory, s = read_once(path, s, progress_reporter(s.output.quiet))
    return Target(path, s, axes, inventory)
