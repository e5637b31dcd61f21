"""Every pipeline stage of the target, as `vllm serve --pipeline-parallel-size P` builds them.

With pipeline parallelism each rank builds only its own slice of the target's layers (vLLM's
`make_layers` asks the PP group which rank it is; the other layers are `PPMissingLayer`), and
each rank loads the checkpoint tensors of its slice. The MTP draft runs on the last rank.
The probe builds the target once per rank, by making the single-process PP group report that
rank: an exclusion entry naming a layer of an earlier stage is live there, and the tensors of
that stage are read there. The last stage's target is the one the draft is wired to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def set_rank(rank: int, size: int) -> None:
    """Make the PP group report `rank` of `size` for this process (global rank 0): vLLM's
    `is_first_rank` / `is_last_rank` compare the global rank with the group's first and last."""
    from vllm.distributed.parallel_state import get_pp_group

    pp = get_pp_group()
    pp.world_size = size
    pp.rank_in_group = rank
    ranks = list(range(1, size + 1))
    ranks[rank] = 0
    pp.ranks = ranks


@contextlib.contextmanager
def at_rank(rank: int, size: int) -> Iterator[None]:
    """The PP group at `rank` for the block, then back at the last rank (where the draft is)."""
    if size <= 1:
        yield
        return
    set_rank(rank, size)
    try:
        yield
    finally:
        set_rank(size - 1, size)


def merge_runs(runs: list[Any]) -> Any:
    """One dry-run result for the target from each stage's: a tensor is read if some stage
    read it (each stage skips the tensors of the layers it does not hold)."""
    from .dryrun import DryRun

    if len(runs) == 1:
        return runs[0]
    out = DryRun()
    seen_errors: set[tuple[str | None, str]] = set()
    for run in runs:
        for tensor, params in run.fed.items():
            fed = out.fed.setdefault(tensor, [])
            fed += [p for p in params if p not in fed]
        for error in run.errors:
            key = (error.tensor, error.message)
            if key not in seen_errors:
                seen_errors.add(key)
                out.errors.append(error)
        out.loaded_params |= run.loaded_params
        out.params_loaded_by_loader |= run.params_loaded_by_loader
        out.completeness_error = out.completeness_error or run.completeness_error
        out.returned_loaded = out.returned_loaded or run.returned_loaded
        out.elided.update(run.elided)
        out.discarded.update(run.discarded)
        out.held_back.update(run.held_back)
        out.truncated.update(run.truncated)
        out.seconds += run.seconds
    out.held_back = {t: by for t, by in out.held_back.items() if t not in out.fed}
    # A tower a later stage does not build (StageMissingLayer) is read on the first stage.
    out.discarded = {t: why for t, why in out.discarded.items() if t not in out.fed}
    return out
