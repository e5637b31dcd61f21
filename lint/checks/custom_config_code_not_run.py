"""A checkpoint whose own configuration class (auto_map) vLLM did not run, read differently by
the built-in class it used instead (the probe's `config_rewrites`)."""

from __future__ import annotations

from ..core.findings import Location
from . import check
from .context import Context, Hit


@check(fields=("config_class", "auto_config", "rewrites", "flag", "vllm_version"))
def custom_config_code_not_run(ctx: Context, options: None) -> list[Hit]:
    """One hit when the configuration class vLLM used (no --trust-remote-code) reads a field of
    config.json as another value than the checkpoint declares: the model is built at sizes the
    checkpoint's own class would not give. Nothing when every declared field reads the same
    (DeepSeek-V3, MiniMax-M3 and Kimi-K3 ship auto_map and read identically)."""
    rewrites = ctx.report.config_rewrites
    if not rewrites:
        return []
    first = next(iter(rewrites.values()))
    said = ", ".join(f"{k} {r.declared} as {r.read}" for k, r in sorted(rewrites.items()))
    return [
        Hit(
            key="config_rewrites",
            fields={
                "config_class": first.config_class.rsplit(".", 1)[-1],
                "auto_config": first.auto_config,
                "rewrites": said,
                "flag": "--trust-remote-code",
                "vllm_version": ctx.vllm_version,
            },
            location=Location(file="config.json", config_key=next(iter(sorted(rewrites)))),
            evidence={
                "config_class": first.config_class,
                "fields": {k: {"declared": r.declared, "read": r.read} for k, r in sorted(rewrites.items())},
            },
        )
    ]
