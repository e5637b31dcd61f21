"""The engine configuration as `vllm serve` creates it, in the probe child.

The probed release's own `EngineArgs.create_engine_config()` builds every config (model,
quantization with its checkpoint scan, SpeculativeConfig with its validation, parallel,
cache, load), so a start-up step a release adds is replayed without code here. A user's own
`vllm serve` command line is parsed by that release's own argument parser: every engine flag
counts, and a flag it rejects is reported with its own message.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from ..report import ChildRequest
from . import release_lookup, serve_validation, unchecked_steps


class ServeArgsRejected(Exception):
    """vLLM's argument parser rejected the serve command: its own message."""


# Where the probed release keeps the `vllm serve` parser's builder and its parser class.
_MAKE_ARG_PARSER = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args")
_FLEXIBLE_PARSER = ("vllm.utils.argparse_utils", "vllm.utils")
# Where a draft is placed for vLLM to read it under the name the user wrote (see _as_written).
_AS_WRITTEN_DIR = "_"


def serve_parser() -> tuple[Any, Any]:
    """(the `vllm` parser, its `serve` subparser) as the probed release's CLI builds them
    (vllm/entrypoints/cli/main.py): `vllm serve ARGV` is parsed as `vllm` parses it, so the
    top-level rewrites (`--model X` moved to the front, `_` read as `-` in flag names, dotted
    `--flag.key value` folded into JSON) happen as in `vllm serve`. Releases without a
    builder get the engine flags alone, with the model as a positional argument."""
    parser_cls = release_lookup.first(_FLEXIBLE_PARSER, "FlexibleArgumentParser")
    top = parser_cls(prog="vllm")
    serve = top.add_subparsers(required=False, dest="subparser").add_parser(
        "serve", usage="vllm serve [model_tag] [options]"
    )
    make = release_lookup.first(_MAKE_ARG_PARSER, "make_arg_parser")
    if make is not None:
        return top, make(serve)
    from vllm.engine.arg_utils import EngineArgs

    serve.add_argument("model_tag", nargs="?")
    return top, EngineArgs.add_cli_args(serve)


def parse_serve(argv: list[str], defaults: dict[str, Any] | None = None) -> Any:
    """The Namespace vLLM's own parser makes of `vllm serve ARGV` (the model as `model`, as
    `vllm serve` sets it), `defaults` in place of vLLM's for the flags ARGV does not give;
    ServeArgsRejected with vLLM's message where it rejects them (argparse prints it and exits 2)."""
    top, serve = serve_parser()
    if defaults:
        serve.set_defaults(**defaults)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = top.parse_args(["serve", *argv])
    except SystemExit as exc:
        if exc.code == 0:
            raise ServeArgsRejected("it asks for help, not a deployment") from None
        said = _rejection(err.getvalue()) or f"vllm serve exited with status {exc.code}"
        raise ServeArgsRejected(f"vLLM {_version()} rejects it: {said}") from None
    except ValueError as exc:  # the `vllm` parser's own checks (a model given only by flags)
        raise ServeArgsRejected(f"vLLM {_version()} rejects it: {' '.join(str(exc).split())}") from None
    if getattr(args, "model_tag", None):
        args.model = args.model_tag
    return args


_MAX_REJECTION = 600


def _rejection(stderr: str) -> str:
    """argparse's error in full (`vllm serve: error: argument --flag: why`, a pydantic
    validation error's lines joined), without the usage line and pydantic's link line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if ": error: " in line), None)
    if start is None:
        return lines[-1] if lines else ""
    kept = [line for line in lines[start:] if not line.startswith("For further information visit")]
    text = " ".join(kept)
    return text if len(text) <= _MAX_REJECTION else text[: _MAX_REJECTION - 3] + "..."


def engine_args(request: ChildRequest) -> Any:
    """EngineArgs for the request: the user's serve command through vLLM's parser where one
    was given (the request's own fields only where the command leaves a flag out), else the
    request's fields; the probe's own settings (the staged model directory, no tokenizer, no
    weights read) always win. The speculative model is the staged draft under the name the
    user wrote (vLLM picks the method from it), or the target's own directory."""
    from vllm.engine.arg_utils import EngineArgs

    spec = _speculative(request)
    serve_argv = list(request.serve_argv or [])
    typed_model = None  # the model as the command names it: a tokenizer defaulting to it is the staged one
    if serve_argv:
        args = parse_serve(serve_argv, _defaults(request, spec))
        try:
            serve_validation.validate(args)
        except serve_validation.Refused as exc:
            raise ServeArgsRejected(f"vLLM {_version()} refuses it at start-up: {exc}") from None
        typed_model = args.model
        _confirm_model(request, args.model)
        ea = EngineArgs.from_cli_args(args)
        if isinstance(ea.speculative_config, dict):
            ea.speculative_config = _place_draft(request, dict(ea.speculative_config), args.model)
    else:
        serve: dict[str, Any] = dict(request.serve_args)  # vLLM's own types judge the values
        ea = EngineArgs(
            model=request.config_dir,
            tensor_parallel_size=request.tensor_parallel_size,
            pipeline_parallel_size=request.pipeline_parallel_size,
            speculative_config=_place_draft(request, spec, None),
            trust_remote_code=bool(request.trust_remote_code),
            **({"dtype": serve["dtype"]} if serve.get("dtype") else {}),
            **({"kv_cache_dtype": serve["kv_cache_dtype"]} if serve.get("kv_cache_dtype") else {}),
        )
    ea.model = request.config_dir
    # The tokenizer is read (from the staged checkpoint) only where a start-up step needs it.
    ea.tokenizer = None if ea.tokenizer in (None, typed_model) else ea.tokenizer
    unchecked_steps.replay_tokenizer(ea, request.config_dir)
    if ea.tokenizer != request.config_dir:
        ea.tokenizer, ea.skip_tokenizer_init = None, True
    unchecked_steps.replay_attention_backend(ea)
    ea.load_format = "dummy"
    return ea


def _speculative(request: ChildRequest) -> dict[str, Any]:
    # A separate draft gets no `quantization`: vLLM then reads the draft checkpoint's own
    # quantization_config, as `--speculative-config '{"method": M, "model": PATH}'` does, and
    # no method unless one was given: vLLM's SpeculativeConfig resolves it from the model as
    # written. An MTP draft is `"method": "mtp"` where the release accepts it; 0.10-0.11 accept
    # only the family names and pick the family's method themselves when none is given
    # (vllm_compat). A drafter the target carries under another method (`dspark`) names it
    # without a model: vLLM takes the target's checkpoint and quantization, as for MTP.
    from .vllm_compat import mtp_method

    asked = request.speculative or {}
    spec: dict[str, Any] = {"num_speculative_tokens": request.num_speculative_tokens}
    method = asked.get("method") if asked.get("model") else asked.get("method", mtp_method())
    if method is not None:
        spec = {"method": method, **spec}
    if asked.get("model"):
        spec["model"] = asked["model"]
    return spec


def _defaults(request: ChildRequest, spec: dict[str, Any]) -> dict[str, Any]:
    """The request's fields as the serve parser's defaults: they count only where the user's
    command leaves the flag out (its speculative config, TP, PP, KV cache dtype)."""
    out: dict[str, Any] = {
        "tensor_parallel_size": request.tensor_parallel_size,
        "pipeline_parallel_size": request.pipeline_parallel_size,
        "speculative_config": spec,
    }
    if request.serve_args.get("kv_cache_dtype"):
        out["kv_cache_dtype"] = request.serve_args["kv_cache_dtype"]
    if request.trust_remote_code:
        out["trust_remote_code"] = True
    return out


def _confirm_model(request: ChildRequest, model: Any) -> None:
    """The parent read the command's model before probing (it is the checkpoint linted); vLLM's
    parser is the judge of which token it is."""
    if request.serve_model is not None and model != request.serve_model:
        raise ServeArgsRejected(
            f"mtplint read the model {request.serve_model!r} from it, vLLM {_version()} reads {model!r}; "
            "give the model as the first argument after `vllm serve`"
        )


def _place_draft(request: ChildRequest, spec: dict[str, Any], target: Any) -> dict[str, Any]:
    """The speculative config with its `model` pointing at what the parent staged: the
    draft's headers under the name as written, or the target's directory where the model
    named is the target itself. The parent read the name before probing (to stage the
    draft); where vLLM's parser reads another, the probe does not go on under a wrong one."""
    written = spec.get("model")
    ours = (request.speculative or {}).get("model")
    if written is None and ours is None:
        return spec
    if written != ours and not (ours is None and written == target):
        said = f"the speculative model {written!r}" if written is not None else "no speculative model"
        raise ServeArgsRejected(
            f"mtplint read the speculative model {ours!r} from it, vLLM {_version()} reads {said}; "
            "write it as `--speculative-config '{\"model\": ...}'`"
        )
    if request.draft_config_dir is None:
        return {**spec, "model": request.config_dir}  # the target itself (MTP on its own checkpoint)
    return {**spec, "model": _as_written(request.draft_config_dir, str(written))}


def _as_written(draft_dir: str, written: str) -> str:
    """A path to the staged draft whose text is the model as the user wrote it, behind a
    one-letter relative directory: vLLM picks the method from that text (`eagle-`, `eagle3`,
    `dflash`, `dspark` in it: config/speculative.py), which the staging directory's own name
    must neither add nor take away. Path separators become `|` (no marker holds either)."""
    import os
    from pathlib import Path

    base = Path(draft_dir).parent
    name = written.replace(os.sep, "|").encode()[-200:].decode(errors="ignore") or "|"
    if name in (".", ".."):
        name += "|"
    link = base / _AS_WRITTEN_DIR / name
    link.parent.mkdir(exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(draft_dir, target_is_directory=True)
    os.chdir(base)  # the relative path resolves here, in this one-shot child
    return f"{_AS_WRITTEN_DIR}/{name}"


def create(request: ChildRequest) -> tuple[Any, Any]:
    """(VllmConfig, SpeculativeConfig) as `vllm serve` creates them for the request; the
    request then says what vLLM read (TP, PP, N, the KV cache dtype, the method it resolved):
    the report is labelled with vLLM's reading, and the probe models it. A start-up step that
    needs the tokenizer the probe could not load is said not checked, and the rest replayed."""
    args = engine_args(request)
    try:
        try:
            vllm_config = args.create_engine_config()
        except Exception as exc:
            if not unchecked_steps.without_tokenizer(args, exc):
                raise
            vllm_config = args.create_engine_config()
    except Exception as exc:
        _record_method(request, _method_resolved_before(exc))
        raise
    _record_read(request, vllm_config)
    return vllm_config, vllm_config.speculative_config


def _method_resolved_before(exc: BaseException) -> str | None:
    """The method SpeculativeConfig had resolved when its own validation raised (it resolves
    the method first in __post_init__): read off the raising frame's `self`."""
    tb = exc.__traceback__
    method: str | None = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        resolved = getattr(owner, "method", None)
        if type(owner).__name__ == "SpeculativeConfig" and isinstance(resolved, str):
            method = resolved
        tb = tb.tb_next
    return method


def _record_method(request: ChildRequest, method: str | None) -> None:
    if method is None:
        request.speculative = {k: v for k, v in (request.speculative or {}).items() if k != "model"}
        return
    own_mtp = request.draft_config_dir is None and (method == "mtp" or method.endswith("_mtp"))
    request.speculative = {} if own_mtp else {"method": method}


def _record_read(request: ChildRequest, vllm_config: Any) -> None:
    spec = vllm_config.speculative_config
    parallel = vllm_config.parallel_config
    request.tensor_parallel_size = parallel.tensor_parallel_size
    request.pipeline_parallel_size = parallel.pipeline_parallel_size
    if spec is None:
        return
    if spec.num_speculative_tokens is not None:
        request.num_speculative_tokens = spec.num_speculative_tokens
    _record_method(request, str(spec.method))
    if request.serve_argv:
        cache_dtype = str(vllm_config.cache_config.cache_dtype)
        serve = {k: v for k, v in request.serve_args.items() if k != "kv_cache_dtype"}
        request.serve_args = {**serve, **({"kv_cache_dtype": cache_dtype} if cache_dtype != "auto" else {})}
        if request.trust_remote_code != bool(vllm_config.model_config.trust_remote_code):
            raise ServeArgsRejected(
                f"vLLM {_version()} reads trust_remote_code {vllm_config.model_config.trust_remote_code} from it, "
                "mtplint did not; write the flag as --trust-remote-code"
            )


def _version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "?"))
