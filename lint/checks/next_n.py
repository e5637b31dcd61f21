"""Does next_n = num_speculative_tokens + 1 fit the kernels, per the probed vLLM's predicates?"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.findings import Basis, Severity
from ..probe.report import KernelCheck
from . import check
from .context import Context, Hit


def kernel_check_json(c: KernelCheck) -> dict[str, object]:
    """A predicate's answer as findings' evidence shows it: its result, or what it raised."""
    answer = {"error": c.error} if c.error is not None else {"result": c.result}
    return {"predicate": c.predicate, "next_n": c.next_n, **answer}


@dataclass(frozen=True)
class KernelOptions:
    # next_n values DeepGEMM ran natively before vLLM had a native-decode predicate.
    legacy_native_next_n: list[int] = field(default_factory=lambda: [1, 2])


@check(fields=("next_n", "n", "gpu", "status", "predicate"), options=KernelOptions)
def next_n_kernel_support(ctx: Context, options: KernelOptions) -> list[Hit]:
    k = ctx.report.kernels
    if k is None or k.status in ("native", "not-applicable"):
        return []
    status = k.status
    if status == "unknown" and k.next_n in options.legacy_native_next_n:
        # No predicate to ask, but DeepGEMM has always run these natively: nothing to report.
        return []
    predicate = next((c.predicate for c in k.checks), "none in this vLLM")
    fields = {
        "next_n": k.next_n,
        "n": ctx.inputs.num_speculative_tokens,
        "gpu": ctx.inputs.gpu,
        "status": status,
        "predicate": predicate,
    }
    # "fallback": this vLLM flattens the query (slower, correct). "unsupported": it would
    # assert at startup. "unknown" (a vLLM without the predicate): no flattened fallback
    # either, so DeepGEMM gets next_n as is and asserts next_n in {1, 2}; known from the
    # kernel, not asked of the probed vLLM.
    severities: dict[str | None, Severity] = {"fallback": "warning", "unsupported": "error", "unknown": "error"}
    severity = severities.get(status)
    basis: Basis = "knowledge" if status == "unknown" else "probe"
    return [
        Hit(
            key=f"next_n={k.next_n}",
            fields=fields,
            severity=severity,
            basis=basis,
            location=ctx.config_location("num_nextn_predict_layers"),
            evidence={"checks": [kernel_check_json(c) for c in k.checks]},
        )
    ]
