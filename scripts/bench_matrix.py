"""Figures for `mtplint matrix` and probe environments (issue 11). Prints numbers.

    .venv/bin/python scripts/bench_matrix.py [--releases 0.29.0,0.31.0,0.33.0] [--n 1,2,3]
        [--recipe dsv4-flash-w4a16-bf16mtp-fixed] [--provision 0.30.0] [--skip-matrix]

- provisioning one release into an empty store with uv and with pip, twice each (the second
  run has that installer's package cache warm; target <= 60 s);
- a matrix of the releases x N (probe workers starting from none), one cell at a time
  (--jobs 1) and with the default --jobs (the CPU count, at most 4), against the sum of the
  single cold lints of the same cells (target <= 1.3x of 3 single cold lints);
- a second checkpoint's lint on a warm worker against its cold lint (target <= 0.3x).
Every lint runs with an empty probe cache; the releases are provisioned before timing. A
"cold" lint has no probe worker (MTPLINT_WORKER_IDLE=0): it imports vLLM itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mtplint.matrix.command import default_jobs

from fixtures.build import cached_build

MTPLINT = [sys.executable, "-m", "mtplint"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t, proc


def provisioning(release: str) -> None:
    for tool in ("uv", "pip"):
        for attempt in ("first", "second"):
            with tempfile.TemporaryDirectory() as store:
                env = dict(os.environ, MTPLINT_ENVS_DIR=store, MTPLINT_INSTALLER=tool)
                seconds, proc = timed([*MTPLINT, "env", "add", release], env)
                ok = "" if proc.returncode == 0 else f"  FAILED: {proc.stderr.strip()[-200:]}"
                print(f"provision vLLM {release} with {tool:<3} ({attempt} run): {seconds:6.1f} s{ok}")


def matrix_vs_singles(path: Path, releases: list[str], ns: list[int]) -> None:
    for r in releases:  # provisioned outside the timings
        subprocess.run([*MTPLINT, "env", "add", r], capture_output=True, check=True, env=_with_store())
    singles = 0.0
    for r in releases:
        for n in ns:
            with tempfile.TemporaryDirectory() as cache:
                env = _with_store(MTPLINT_CACHE_DIR=cache, MTPLINT_WORKER_IDLE="0")
                seconds, proc = timed([*MTPLINT, str(path), "-q", "--vllm-commit", r, "-n", str(n)], env)
                print(f"single cold lint vLLM {r} n={n}: {seconds:6.1f} s (exit {proc.returncode})")
                singles += seconds
    per_release = singles / len(ns)  # the target compares against one single cold lint per release
    print(f"sum of the {len(releases) * len(ns)} single cold lints:      {singles:6.1f} s")
    for jobs in (1, default_jobs()):
        with tempfile.TemporaryDirectory() as cache, _no_workers_yet() as workers:
            env = _with_store(MTPLINT_CACHE_DIR=cache, MTPLINT_WORKER_DIR=workers)
            cmd = [*MTPLINT, "matrix", str(path), "-q", "--vllm-commit", ",".join(releases)]
            cmd += ["-n", ",".join(map(str, ns)), "--format", "json", "--jobs", str(jobs)]
            seconds, proc = timed(cmd, env)
            cells = len(json.loads(proc.stdout)["cells"]) if proc.stdout.strip() else 0
            warm, _ = timed(cmd, env)
        print(
            f"matrix {len(releases)} x {len(ns)} ({cells} cells), --jobs {jobs}, cold cache: {seconds:6.1f} s "
            f"(exit {proc.returncode}); matrix / sum of singles: {seconds / singles:.2f}x; "
            f"matrix / {len(releases)} single cold lints: {seconds / per_release:.2f}x (target <= 1.3x)"
        )
        print(f"  the same matrix again (every cell cached): {warm:6.1f} s")


def _with_store(**extra: str) -> dict[str, str]:
    """The environment for a timed run: an empty cache, but the provisioned environments of
    the default store (they live under the cache directory unless MTPLINT_ENVS_DIR says where:
    without it every timed lint would provision its release again)."""
    from mtplint.envs.store import root

    return dict(os.environ, MTPLINT_ENVS_DIR=str(root()), **extra)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default="0.29.0,0.31.0,0.33.0")
    ap.add_argument("--n", default="1,2,3")
    ap.add_argument("--recipe", default="dsv4-flash-w4a16-bf16mtp-fixed")
    ap.add_argument("--provision", default="0.30.0", help="release whose provisioning is timed")
    ap.add_argument("--second", default="dsv4-flash-official", help="the checkpoint linted on a warm worker")
    ap.add_argument("--skip-matrix", action="store_true")
    ap.add_argument("--skip-provision", action="store_true")
    args = ap.parse_args()
    if not args.skip_provision:
        provisioning(args.provision)
    if not args.skip_matrix:
        ns = [int(x) for x in args.n.split(",")]
        matrix_vs_singles(cached_build(args.recipe), args.releases.split(","), ns)
    warm_second_checkpoint(cached_build(args.recipe), cached_build(args.second))


@contextlib.contextmanager
def _no_workers_yet() -> Iterator[str]:
    """An empty worker directory (short: socket paths), its workers stopped afterwards."""
    from mtplint.probe.workers import stop_all

    where = tempfile.mkdtemp(prefix="mwb-")
    try:
        yield where
    finally:
        stop_all(Path(where))
        shutil.rmtree(where, ignore_errors=True)


def warm_second_checkpoint(first: Path, second: Path, rounds: int = 3) -> None:
    """The pinned vLLM: `second` linted cold, and after `first` on the same worker."""
    cold, warm = [], []
    for _ in range(rounds):  # alternated, so machine noise hits both alike
        with tempfile.TemporaryDirectory() as cache:
            seconds, proc = timed(
                [*MTPLINT, str(second), "-q"], _with_store(MTPLINT_CACHE_DIR=cache, MTPLINT_WORKER_IDLE="0")
            )
            cold.append(seconds)
        with tempfile.TemporaryDirectory() as cache, _no_workers_yet() as workers:
            env = _with_store(MTPLINT_CACHE_DIR=cache, MTPLINT_WORKER_DIR=workers)
            timed([*MTPLINT, str(first), "-q"], env)  # starts the worker
            seconds, proc2 = timed([*MTPLINT, str(second), "-q"], env)
            warm.append(seconds)
        assert proc.stdout == proc2.stdout, (proc.stdout, proc2.stdout)  # the same verdict
    c, w = statistics.median(cold), statistics.median(warm)
    print(
        f"{second.name}: cold lint {c:5.1f} s, on a warm worker (after {first.name}) {w:5.1f} s: "
        f"{w / c:.2f}x (target <= 0.3x; medians of {rounds})"
    )


if __name__ == "__main__":
    main()
