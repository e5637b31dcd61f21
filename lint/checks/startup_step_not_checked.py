"""Start-up steps of the serve command the probe could not replay in its environment."""

from __future__ import annotations

from . import check
from .context import Context, Hit


@check(fields=("step", "flag", "why"))
def startup_step_not_checked(ctx: Context, options: None) -> list[Hit]:
    """One hit per step the probe left out (report.unchecked_steps): what vLLM does there, the
    flag that asks for it, and what the probe lacked. The rest of the lint ran without it."""
    return [
        Hit(
            key=f"{s.flag}:{s.step}",
            fields={"step": s.step, "flag": s.flag, "why": s.why},
            location=ctx.config_location(),
            evidence={"flag": s.flag, "why": s.why, **({"absent_package": s.package} if s.package else {})},
        )
        for s in ctx.report.unchecked_steps
    ]
