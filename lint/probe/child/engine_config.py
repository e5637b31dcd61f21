"""The engine configuration as `vllm serve` creates it, in the probe child.

The probed release's own `EngineArgs.create_engine_config()` builds every config (model,
quantization with its checkpoint scan, SpeculativeConfig with its validation, parallel,
cache, load), so a start-up step a release adds is replayed without code here. A user's own
`vllm serve` command line is parsed by that release's own argument parser: every engine flag
counts, and a flag it rejects is reported with its own message.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
from typing import Any

from ..report import ChildRequest
from . import unchecked_steps


class ServeArgsRejected(Exception):
    """vLLM's argument parser rejected the serve command: its own message."""


# Where the probed release keeps the `vllm serve` parser's builder and its parser class.
_MAKE_ARG_PARSER = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args")
_FLEXIBLE_PARSER = ("vllm.utils.argparse_utils", "vllm.utils")


def _first(modules: tuple[str, ...], name: str) -> Any:
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except Exception:
            continue
        if found is not None:
            return found
    return None


def serve_parser() -> Any:
    """`vllm serve`'s parser of the probed release (frontend and engine flags, the model as
    its positional argument); the engine flags alone where the release has no builder."""
    parser_cls = _first(_FLEXIBLE_PARSER, "FlexibleArgumentParser")
    parser = parser_cls(prog="vllm serve")
    make = _first(_MAKE_ARG_PARSER, "make_arg_parser")
    if make is not None:
        return make(parser)
    from vllm.engine.arg_utils import EngineArgs

    parser.add_argument("model_tag", nargs="?")
    return EngineArgs.add_cli_args(parser)


def parse_serve(argv: list[str]) -> Any:
    """The Namespace vLLM's own parser makes of `vllm serve ARGV`; ServeArgsRejected with
    its message where it rejects them (argparse prints it and exits 2)."""
    parser = serve_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        lines = [line for line in err.getvalue().strip().splitlines() if line.strip()]
        if exc.code == 0:
            raise ServeArgsRejected("it asks for help, not a deployment") from None
        said = lines[-1] if lines else f"vllm serve exited with status {exc.code}"
        raise ServeArgsRejected(f"vLLM {_version()} rejects it: {said}") from None
    if getattr(args, "model_tag", None):
        args.model = args.model_tag
    return args


def engine_args(request: ChildRequest) -> Any:
    """EngineArgs for the request: the user's serve command through vLLM's parser where one
    was given, the request's shorthand fields as its defaults; the probe's own settings
    (the staged model directory, no tokenizer, no weights read) always win."""
    from vllm.engine.arg_utils import EngineArgs

    spec = _speculative(request)
    serve_argv = list(request.serve_argv or [])
    if serve_argv:
        defaults = [request.config_dir, *_shorthand_flags(request, spec)]
        args = parse_serve([*defaults, *serve_argv[1:]])  # serve_argv[0] is the user's model path
        ea = EngineArgs.from_cli_args(args)
    else:
        serve: dict[str, Any] = dict(request.serve_args)  # vLLM's own types judge the values
        ea = EngineArgs(
            model=request.config_dir,
            tensor_parallel_size=request.tensor_parallel_size,
            pipeline_parallel_size=request.pipeline_parallel_size,
            speculative_config=spec,
            trust_remote_code=bool(request.trust_remote_code),
            **({"dtype": serve["dtype"]} if serve.get("dtype") else {}),
            **({"kv_cache_dtype": serve["kv_cache_dtype"]} if serve.get("kv_cache_dtype") else {}),
        )
    ea.model = request.config_dir
    # The tokenizer is read (from the staged checkpoint) only where a start-up step needs it.
    typed_model = serve_argv[0] if serve_argv else None
    ea.tokenizer = None if ea.tokenizer in (None, typed_model) else ea.tokenizer
    unchecked_steps.replay_tokenizer(ea, request.config_dir)
    if ea.tokenizer != request.config_dir:
        ea.tokenizer, ea.skip_tokenizer_init = None, True
    unchecked_steps.replay_attention_backend(ea)
    ea.load_format = "dummy"
    if request.draft_config_dir and isinstance(ea.speculative_config, dict):
        # A separate draft (--draft) is read from its staged directory, whatever path was typed.
        ea.speculative_config = {**ea.speculative_config, "model": request.draft_config_dir}
    return ea


def _speculative(request: ChildRequest) -> dict[str, Any]:
    # A separate draft gets no `quantization`: vLLM then reads the draft checkpoint's own
    # quantization_config, as `--speculative-config '{"method": M, "model": PATH}'` does.
    # An MTP draft is `"method": "mtp"` where the release accepts it; 0.10-0.11 accept only
    # the family names and pick the family's method themselves when none is given (vllm_compat).
    # A drafter the target carries under another method (`dspark`) names it without a model:
    # vLLM takes the target's checkpoint and quantization, as for MTP.
    from .vllm_compat import mtp_method

    separate = request.speculative or {}
    method = separate.get("method", mtp_method())
    spec: dict[str, Any] = {"num_speculative_tokens": request.num_speculative_tokens}
    if method is not None:
        spec = {"method": method, **spec}
    if request.draft_config_dir:
        spec["model"] = request.draft_config_dir
    return spec


def _shorthand_flags(request: ChildRequest, spec: dict[str, Any]) -> list[str]:
    """The request's shorthand fields as flags placed before the user's own (argparse keeps
    the last value given, so the user's flags win)."""
    flags = [
        "--tensor-parallel-size",
        str(request.tensor_parallel_size),
        "--pipeline-parallel-size",
        str(request.pipeline_parallel_size),
        "--speculative-config",
        json.dumps(spec),
    ]
    serve = request.serve_args
    if serve.get("kv_cache_dtype"):
        flags += ["--kv-cache-dtype", serve["kv_cache_dtype"]]
    if request.trust_remote_code:
        flags.append("--trust-remote-code")
    return flags


def create(request: ChildRequest) -> tuple[Any, Any]:
    """(VllmConfig, SpeculativeConfig) as `vllm serve` creates them for the request."""
    ea = engine_args(request)
    try:
        vllm_config = ea.create_engine_config()
    except Exception as exc:
        if not unchecked_steps.without_tokenizer(ea, exc):
            raise
        vllm_config = ea.create_engine_config()
    if request.serve_argv:
        _check_read_alike(request, vllm_config)
    return vllm_config, vllm_config.speculative_config


def _check_read_alike(request: ChildRequest, vllm_config: Any) -> None:
    """mtplint read the shorthand flags of the serve command before probing (the platform,
    the cache key and the report's inputs follow them); vLLM's parser is the judge. Where
    they read it differently the probe does not go on under a wrong label."""
    spec = vllm_config.speculative_config
    kv = (request.serve_args or {}).get("kv_cache_dtype")
    pairs: list[tuple[str, Any, Any]] = [
        ("tensor-parallel-size", request.tensor_parallel_size, vllm_config.parallel_config.tensor_parallel_size),
        (
            "pipeline-parallel-size",
            request.pipeline_parallel_size,
            vllm_config.parallel_config.pipeline_parallel_size,
        ),
        ("num_speculative_tokens", request.num_speculative_tokens, getattr(spec, "num_speculative_tokens", None)),
    ]
    if kv:
        pairs.append(("kv-cache-dtype", kv, vllm_config.cache_config.cache_dtype))
    for name, ours, theirs in pairs:
        if ours != theirs:
            raise ServeArgsRejected(
                f"mtplint read {name} {ours} from it, vLLM {_version()} reads {theirs}; "
                "write the flag as `vllm serve --help` spells it"
            )


def _version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "?"))
