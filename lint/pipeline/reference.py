"""The source checkpoint a lint compares the MTP block with: `mtplint PATH --reference SOURCE`.

The reference is read header-only, like any checkpoint (a local directory, hf://ORG/NAME[@REV]
or a Git LFS clone), and never probed: vLLM never serves it. Its inventory reaches the checks
beside the artifact's (Context.reference), so MTP019/MTP020 compare formats, bits per weight
and sampled bytes (lint/inventory/reference.py). One reference belongs to one PATH, and not
to a separate --draft (the reference of a draft checkpoint would be the draft's own source:
a different comparison that nobody has asked for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.schema import LintSettings
from ..core.errors import BadInput
from ..inventory.model import Inventory

_ROLE = "the --reference checkpoint"


def check_usage(s: LintSettings, paths: int) -> None:
    """Usage errors, before anything is read."""
    if not s.reference:
        return
    if paths > 1:
        raise BadInput("--reference is the source of one checkpoint: pass one PATH with it")
    if s.draft:
        raise BadInput(
            "--reference compares a checkpoint's own MTP block with its source: it does not apply to --draft"
        )


def load_reference(s: LintSettings, progress: Any = None) -> Inventory | None:
    """The reference's inventory; None without --reference. Unreadable, or without any MTP
    tensor (it cannot be the source of an MTP block): bad input naming it."""
    from ..inventory.checkpoint import load_companion
    from ..inventory.reference import mtp_modules

    given = s.reference
    if not given:
        return None
    inventory = load_companion(Path(given), _ROLE, progress)
    if not mtp_modules(inventory):
        raise BadInput(
            f"no MTP tensors: it cannot be the source of this checkpoint's MTP block ({_ROLE})",
            path=inventory.origin or str(given),
        )
    return inventory


def reference_origin(inventory: Inventory | None, given: str | None) -> str | None:
    """What the report's inputs say of the reference: its hub origin (hf://ORG/NAME@COMMIT,
    never a token) or the path as given; None without one."""
    if inventory is None:
        return None
    return inventory.origin or str(given)
