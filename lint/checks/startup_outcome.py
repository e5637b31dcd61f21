"""What the probed vLLM does at start-up with a draft parameter nothing loads, as the probe
observed it: the replayed load raised (vLLM's own checks, where they run: the default loader's
track_weights_loading, an MTP loader's completeness check), a load error stops it first, or
nothing raised and the parameter keeps what construction left in it."""

from __future__ import annotations

from .context import Context

_SHOWN = 160  # characters of vLLM's message quoted in a finding (the evidence keeps all of it)


def unloaded_draft_param(ctx: Context, param: str) -> str:
    """One clause: what vLLM does at start-up, from the probe's replay of the loads."""
    version = ctx.vllm_version
    err = ctx.load("draft").completeness_error
    if err is not None:
        # DefaultModelLoader.track_weights_loading (unquantized models) lists the parameters;
        # an MTP loader's own check names a layer or a first parameter.
        named = " naming it" if repr(param) in err.message or f" {param} " in f" {err.message} " else ""
        message = err.message if len(err.message) <= _SHOWN else err.message[:_SHOWN].rstrip() + "..."
        where = f" in {err.frame.function}" if err.frame else ""
        return f"vLLM {version} raises at start-up{where}{named}: {err.type}: {message}"
    errors = ctx.load_errors()
    if errors:
        model, first = errors[0]
        return (
            f"vLLM {version} stops at start-up on a load error first ({first.type} loading the {model}'s "
            f"{first.tensor or 'tensors'}); were it loaded, the parameter would keep whatever construction left in it"
        )
    # What the probe cannot see: post-load steps (process_weights_after_loading) do not run
    # on meta tensors; MTP018 reports the ones known to reject an unloaded parameter.
    return (
        f"no start-up check raised in vLLM {version}'s replayed load (load_weights and the loader's checks; "
        "post-load quantization steps are not replayed): it keeps whatever construction left in it"
    )
