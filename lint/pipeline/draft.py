"""A draft from its own checkpoint (`mtplint TARGET --draft PATH [--method M]`, or the `model` of a
serve command's `--speculative-config`), or a drafter the target carries that is not served as
MTP (`mtplint TARGET --method dspark`).

EAGLE/EAGLE3 heads, DFlash/DSpark drafts, plain draft models and assistant drafts served as
`"method": "mtp"` ship as a checkpoint of their own, served with `--speculative-config
'{"method": M, "model": PATH}'`. The lint's subject is then the draft: findings name its
files, and the target contributes its configuration and which of its parameters the draft
shares. The method is the one the probed release's own SpeculativeConfig resolves, from the
model's name as written where none is given (in the probe child); `--method` is any method
that release declares (lint/pipeline/spec_methods.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.schema import LintSettings
from ..core.errors import BadInput
from ..inventory.model import Inventory
from . import spec_methods


def check_usage(s: LintSettings, paths: int) -> None:
    """Usage errors, before anything is read."""
    method = s.method
    if method and not s.draft and _needs_draft(method):
        raise BadInput(
            f"--method {method} needs --draft PATH (only {' and '.join(spec_methods.EMBEDDED)} are "
            "read from the target's own checkpoint)"
        )
    if s.draft and paths > 1:
        raise BadInput("--draft belongs to one target: pass one PATH with it")
    if method and paths > 1:
        raise BadInput(f"--method {method} belongs to one target: pass one PATH with it")


def _needs_draft(method: str) -> bool:
    # An unknown name is judged later against the probed release's own list.
    known = method in spec_methods.FALLBACK and method not in spec_methods.MODEL_FREE
    return known and method not in spec_methods.EMBEDDED


def load_draft(s: LintSettings, progress: Any = None) -> tuple[Inventory, str | None] | None:
    """The draft's inventory and the method asked for (None: vLLM resolves it); None without a draft."""
    from ..inventory.checkpoint import load_companion

    given = s.draft
    if not given:
        return None
    where = "the serve command's speculative model" if s.serve_draft else "the --draft checkpoint"
    inventory = load_companion(Path(given), where, progress)
    return inventory, s.method


def as_written(s: LintSettings) -> str | None:
    """The draft's name as vLLM is given it (it picks the method from that text): the serve
    command's speculative model as written, else --draft, a hub draft as ORG/NAME."""
    if s.serve_draft:
        return s.serve_draft
    if not s.draft:
        return None
    return s.draft.removeprefix("hf://").split("@", 1)[0] if s.draft.startswith("hf://") else s.draft


def speculative_request(
    s: LintSettings, draft: tuple[Inventory, str | None] | None, python: str | None
) -> dict[str, str]:
    """The probe request's `speculative` field: {"model": NAME} (as written; vLLM resolves the
    method from it) and {"method": M} where one is given, for a separate draft; {"method": M}
    for an embedded drafter other than MTP; {} for the target's own MTP block. A given method
    is checked against the methods the probed release declares (read from its source)."""
    given = s.method
    if given is not None:
        given = _declared_method(given, python)
    written = as_written(s)
    if written is None:
        if given is None or given == "mtp":
            return {}  # the target's own MTP block, as without --method
        return {"method": given}
    return {"model": written, **({"method": given} if given else {})}


def _declared_method(method: str, python: str | None) -> str:
    declared = spec_methods.declared(python)
    methods = declared or spec_methods.FALLBACK
    if method not in methods and method != "[ngram]":
        source = (
            "the probed vLLM declares"
            if declared
            else "vLLM 0.33.0 declares (the probed release's list was unreadable)"
        )
        raise BadInput(f"--method {method}: not a speculative method {source}: {spec_methods.listing(methods)}")
    method = spec_methods.canonical(method, methods)
    if method in spec_methods.MODEL_FREE:
        raise BadInput(
            f"--method {method} proposes without a draft model (nothing is built from a checkpoint): "
            "nothing for mtplint to lint; lint the target without --method"
        )
    return method
