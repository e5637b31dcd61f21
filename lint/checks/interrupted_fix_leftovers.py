"""Files an interrupted `mtplint fix` left in the checkpoint: its lock and its temp files
(inventory.fix_files). The checkpoint still loads (writes are atomic and ordered), but an upload
right after carries them, and a rollback copy holds an earlier state of a file."""

from __future__ import annotations

from ..core.findings import Location
from ..inventory.fix_files import LOCK_NAME
from . import check
from .context import Context, Hit


@check(fields=("count", "files"))
def interrupted_fix_leftovers(ctx: Context, options: None) -> list[Hit]:
    """One hit naming every leftover the inventory listed (the directory, or the hub's file list)."""
    names = ctx.inventory.fix_leftovers
    if not names:
        return []
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return [
        Hit(
            key="fix-leftovers",
            fields={"count": len(names), "files": shown},
            location=Location(file=names[0]),
            evidence={"files": list(names), "lock": LOCK_NAME in names},
        )
    ]
