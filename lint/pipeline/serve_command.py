"""The `vllm serve` command line a lint modelled, with the runtime patches a finding recommends."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any


def serve_command(path: Path | str, request: Any, patch_ids: list[str]) -> str:
    """The vLLM command line this lint modelled, with the patches that resolve a finding."""
    spec = json.dumps(
        {"method": "mtp", "num_speculative_tokens": request.num_speculative_tokens}, separators=(",", ":")
    )
    if getattr(request, "serve_argv", None):
        # The user's own command: as given, the checkpoint linted as its model.
        from ..config.serve_args import with_model

        argv = [shlex.quote(a) for a in with_model(list(request.serve_argv), str(path))]
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(getattr(request, "serve_env", {}).items())]
        return " ".join([f"MTPLINT_PATCHES={','.join(patch_ids)}", *env, "vllm", "serve", *argv])
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
    if path.startswith("hf://"):
        repo_id, _, commit = path.removeprefix("hf://").partition("@")
        return [shlex.quote(repo_id)] + (["--revision", shlex.quote(commit)] if commit else [])
    return [shlex.quote(path)]
