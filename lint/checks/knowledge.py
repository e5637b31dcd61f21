"""Knowledge tables: rows a check's options carry where the probe cannot reach (the forward
path, process_weights_after_loading), each read from a cited vLLM release source."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.versions import in_range
from .context import Context


def require_columns(option: str, rows: Iterable[dict[str, Any]], columns: set[str]) -> None:
    """Refuse a row that lacks a column, naming the option and the row's id: a rule file's
    typo is an error when the rules load, not a silent row."""
    for row in rows:
        missing = columns - set(row)
        if missing:
            raise ValueError(f"options.{option} entry {row.get('id')!r} lacks {', '.join(sorted(missing))}")


def requested_method(ctx: Context) -> str:
    """The method the probe requested (--method, or read from a separate draft's config)."""
    return (ctx.report.request.speculative or {}).get("method") or ctx.inputs.method or "mtp"


def row_applies(ctx: Context, row: dict[str, Any], n: int, method: str) -> bool:
    """Whether a deployment row (its `methods`; `architectures` and `sm` where it names them;
    the `n` and `vllm` specifiers) covers the deployment linted."""
    if method not in row["methods"]:
        return False
    archs = row.get("architectures")
    if archs and not set(ctx.inventory.config.get("architectures") or []) & set(archs):
        return False
    sm = ctx.inputs.sm
    if row.get("sm") and (sm is None or not in_range(str(sm), row["sm"])):
        return False
    return in_range(str(n), row["n"]) and in_range(ctx.vllm_version, row["vllm"])
