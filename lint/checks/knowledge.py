"""Knowledge tables: rows a check's options carry where the probe cannot reach (the forward
path, process_weights_after_loading), each read from a cited vLLM release source."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def require_columns(option: str, rows: Iterable[dict[str, Any]], columns: set[str]) -> None:
    """Refuse a row that lacks a column, naming the option and the row's id: a rule file's
    typo is an error when the rules load, not a silent row."""
    for row in rows:
        missing = columns - set(row)
        if missing:
            raise ValueError(f"options.{option} entry {row.get('id')!r} lacks {', '.join(sorted(missing))}")
