"""Defects of a vLLM release that start, serve and raise nothing, yet give wrong output, NaN or
an acceptance near zero, for one drafter on one GPU family: the forward pass the probe never
runs. Which release, GPU, method, target architecture and num_speculative_tokens a defect needs
is a knowledge table in the rule's options (`options.defects`), each row read off the released
sources with the release that fixed it; the deployment linted and the probed release decide
whether a row applies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import check
from .context import Context, Hit
from .knowledge import requested_method, require_columns, row_applies

_DEFECT_KEYS = {"id", "vllm", "methods", "sm", "n", "what", "source", "fixed_in", "workaround"}
_SEVERITIES = {"error", "warning"}


@dataclass(frozen=True)
class DefectOptions:
    # Optional per row: `architectures` (of the checkpoint linted, the draft's with --draft;
    # absent: any) and
    # `severity` (absent: the rule's). Wrong output or NaN is an error; an acceptance near zero
    # is a warning: the target still verifies every token, only the speed-up is lost.
    # `avoided_by` (absent: nothing): the workarounds as the probed vLLM reads them off the
    # command (report.served_with), each a set of switches; a deployment with one is spared.
    defects: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        require_columns("defects", self.defects, _DEFECT_KEYS)
        for row in self.defects:
            if row.get("severity", "warning") not in _SEVERITIES:
                raise ValueError(f"options.defects entry {row['id']!r}: severity is error or warning")


@check(
    fields=("method", "n", "gpu", "vllm_version", "what", "source", "fixed_in", "workaround"),
    options=DefectOptions,
)
def known_silent_defect(ctx: Context, options: DefectOptions) -> list[Hit]:
    n = ctx.inputs.num_speculative_tokens
    method = requested_method(ctx)
    sm = ctx.inputs.sm
    if not isinstance(n, int) or sm is None:
        return []
    hits: list[Hit] = []
    for row in options.defects:
        if not row_applies(ctx, row, n, method) or _worked_around(ctx, row):
            continue
        hits.append(
            Hit(
                key=row["id"],
                fields={
                    "method": method,
                    "n": n,
                    "gpu": ctx.inputs.gpu or f"SM {sm}",
                    "vllm_version": ctx.vllm_version,
                    "what": row["what"],
                    "source": row["source"],
                    "fixed_in": row["fixed_in"],
                    "workaround": row["workaround"],
                },
                severity=row.get("severity"),
                basis="knowledge",
                location=ctx.config_location("architectures"),
                evidence={"entry": row["id"], "vllm_range": row["vllm"], "sm_range": row["sm"], "n_range": row["n"]},
            )
        )
    return hits


def _worked_around(ctx: Context, row: dict[str, Any]) -> bool:
    served = ctx.report.served_with
    return any(all(served.get(k) == v for k, v in way.items()) for way in row.get("avoided_by", []))
