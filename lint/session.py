"""What `mtplint check` and `mtplint fix` share: turning settings into a probe request,
running the lint pipeline, and the one-line error handling with documented exit codes."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, BadInput, MtplintError, Terminated
from .findings import Finding, RunResult
from .inventory.model import Inventory
from .probe.report import ProbeReport

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


def progress_reporter(quiet: bool) -> Callable[[str], None] | None:
    """Progress lines on stderr for slow steps; none when quiet or not on a terminal."""
    if quiet or not sys.stderr.isatty():
        return None
    started = time.perf_counter()

    def say(msg: str) -> None:
        click.echo(f"[{time.perf_counter() - started:5.1f}s] {msg}", err=True)

    return say


def guarded(run: Callable[[], int], debug: bool) -> int:
    """Run a command body: MtplintError -> one line and its exit code; Ctrl-C -> exit 130,
    SIGTERM/SIGHUP -> 128 + the signal (after the probe's processes and files are gone);
    anything else is an mtplint bug -> one line and exit 3. Tracebacks only with --debug."""
    from .probe.lifecycle import terminating_signals_raise

    try:
        with terminating_signals_raise():
            return run()
    except MtplintError as exc:
        hint = " (rerun with --debug for the probe's output)" if exc.detail and not debug else ""
        click.echo(f"mtplint: error: {exc.one_line()}{hint}", err=True)
        if exc.detail and debug:
            click.echo(exc.detail, err=True)
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("mtplint: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Terminated as exc:
        click.echo(f"mtplint: terminated by {signal.Signals(exc.signum).name}", err=True)
        return exc.exit_code
    except Exception as exc:
        click.echo(f"mtplint: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
        if debug:
            traceback.print_exc()
        return EXIT_INTERNAL


@dataclass
class Linted:
    inventory: Inventory
    report: ProbeReport
    findings: list[Finding]
    evaluated: list[Any]
    inputs: dict[str, Any]
    request: Any

    def result(self) -> RunResult:
        """What the reporters render."""
        vllm = self.report.vllm
        return RunResult(
            findings=self.findings,
            rules_evaluated=[
                {"code": r.code, "name": r.name, "severity": r.severity, "summary": r.summary} for r in self.evaluated
            ],
            vllm={"version": vllm.version, "commit": vllm.commit},
            inputs=self.inputs,
            probe={"cached": self.report.cached, "seconds": round(self.report.seconds, 2)},
        )


def lint(
    path: Path,
    s: dict[str, Any],
    *,
    patches: list[str] | None = None,
    fresh: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Linted:
    """The lint pipeline: inventory -> probe (cached) -> rule checks -> findings.
    fresh: probe again and store the new report, so a check right after is a cache hit."""
    from .envs.resolve import probe_target
    from .gpus import resolve
    from .inventory.checkpoint import load_inventory
    from .patches.catalog import PATCHES, in_range
    from .preflight import check_config, explain_depth_zero, raise_for_config_error
    from .probe import cache
    from .probe.memory_cap import resolve_limit
    from .probe.runner import ProbeRequest, cache_key, check_vllm_commit, run_probe, vllm_identity

    gpu = resolve(s.get("gpu"), s.get("sm"))
    patches = list(s.get("patches", []) if patches is None else patches)
    unknown = [p for p in patches if p not in PATCHES]
    if unknown:
        raise BadInput(f"--with-patches: unknown patch id(s) {', '.join(unknown)}; bundled: {', '.join(PATCHES)}")
    if progress:
        progress(f"reading safetensors headers in {path}")
    memory_limit = resolve_limit(s.get("probe_memory"))
    inventory = load_inventory(path)
    check_config(inventory)  # before vLLM sees it: bad values and absurd sizes are exit 2
    target = probe_target(s, interpreter_path(s.get("vllm_python")))  # provisions --vllm-commit X on first use
    python = target.python
    identity = vllm_identity(python)
    check_vllm_commit(target.wanted, identity)
    if identity.get("version") is None:
        raise BadInput(
            f"no vLLM is installed in {identity.get('python')} (run scripts/setup.sh, or pass --vllm-python)"
        )
    for p in patches:
        if not in_range(identity["version"], PATCHES[p].vllm):
            raise BadInput(
                f"--with-patches: {p} applies to vLLM {PATCHES[p].vllm}; the probed vLLM is "
                f"{identity['version']} ({PATCHES[p].summary})"
            )
    request = ProbeRequest(
        sm=gpu.sm,
        gpu_name=gpu.name,
        gpu_memory=gpu.memory,
        num_speculative_tokens=s["num_speculative_tokens"],
        tensor_parallel_size=s["tensor_parallel_size"],
        pipeline_parallel_size=s["pipeline_parallel_size"],
        patches=patches,
        serve_args={"kv_cache_dtype": s["kv_cache_dtype"]} if s.get("kv_cache_dtype") else {},
        python=python,
        timeout=s["probe_timeout"],
        elide=not s.get("no_elision"),
        trust_remote_code=bool(s.get("trust_remote_code")),
        memory_limit=memory_limit,
    )
    report = run_probe(
        inventory, request, identity=identity, use_cache=not (fresh or s.get("no_cache")), progress=progress
    )
    raise_for_config_error(inventory, report.config_error)
    if fresh:
        cache.store(cache_key(inventory, request, identity), report)
    explain_depth_zero(inventory, report.config_error)  # after the store: the cache keeps vLLM's words
    inputs = {
        "path": inventory.origin or str(path),  # a hub repository as hf://ORG/NAME@COMMIT
        "gpu": gpu.key,
        "sm": f"{gpu.sm[0]}.{gpu.sm[1]}",
        "num_speculative_tokens": request.num_speculative_tokens,
        "tensor_parallel_size": request.tensor_parallel_size,
        "pipeline_parallel_size": request.pipeline_parallel_size,
        "patches": request.patches,
    }
    findings, evaluated = judge(path, inventory, report, inputs, request, s)
    return Linted(inventory, report, findings, evaluated, inputs, request)


def judge(
    path: Path, inventory: Inventory, report: ProbeReport, inputs: dict[str, Any], request: Any, s: dict[str, Any]
) -> tuple[list[Finding], list[Any]]:
    """The rule checks over one probe report: findings, with the fixes this mtplint ships
    and the exact serve command for the inputs linted. No vLLM here: the fast test tier
    runs this on recorded reports."""
    from .engine.evaluate import evaluate
    from .recommend import recommend

    findings, evaluated = evaluate(
        inventory, report, inputs, select=s.get("select"), ignore=s.get("ignore"), recommend=recommend
    )
    for f in findings:
        if f.fixes.patches:
            f.fixes.serve = serve_command(inputs.get("path") or path, request, f.fixes.patches)
    return findings, evaluated


def serve_command(path: Path | str, request: Any, patch_ids: list[str]) -> str:
    """The vLLM command line this lint modelled, with the patches that resolve a finding."""
    import json
    import shlex

    spec = json.dumps(
        {"method": "mtp", "num_speculative_tokens": request.num_speculative_tokens}, separators=(",", ":")
    )
    parts = [
        f"MTPLINT_PATCHES={','.join(patch_ids)}",
        "vllm",
        "serve",
        *_served_model(str(path)),
        "--speculative-config",
        shlex.quote(spec),
    ]
    if request.tensor_parallel_size > 1:
        parts += ["--tensor-parallel-size", str(request.tensor_parallel_size)]
    if request.pipeline_parallel_size > 1:
        parts += ["--pipeline-parallel-size", str(request.pipeline_parallel_size)]
    if request.serve_args.get("kv_cache_dtype"):
        parts += ["--kv-cache-dtype", request.serve_args["kv_cache_dtype"]]
    return " ".join(parts)


def _served_model(path: str) -> list[str]:
    """vllm serve's model argument: a directory, or ORG/NAME --revision COMMIT for hf://ORG/NAME@COMMIT."""
    import shlex

    if path.startswith("hf://"):
        repo_id, _, commit = path.removeprefix("hf://").partition("@")
        return [shlex.quote(repo_id)] + (["--revision", shlex.quote(commit)] if commit else [])
    return [shlex.quote(path)]


def interpreter_path(python: str | Path | None) -> str | None:
    """--vllm-python as the probe child can run it from its own working directory: a path
    made absolute (not resolved: a venv's python is a symlink that must keep its name), a
    bare command looked up on PATH."""
    if not python:
        return None
    python = str(python)
    if os.sep in python:
        return os.path.abspath(python)
    return shutil.which(python) or python
