"""Time the everyday loop: a repeated `mtplint PATH` whose findings come from the verdict cache
(pre-commit, fix, re-lint), the same with -v (the draft's module table, remembered with the
verdict), then the same with only the probe report and inventory memo cached,
beside a bare `python -c pass` and the bare import of
mtplint's CLI measured in the same run. Prints numbers, asserts nothing.

    .venv/bin/python scripts/bench_cached_lint.py [--runs 7] [--recipes dsv4-flash-w4a16-bf16mtp dsv3-fp8-official]

The first lint of each recipe (probe, cache store) is not timed. Medians of --runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for fixtures/

from fixtures.build import cached_build


def timed(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, int]:
    """Median wall seconds, median CPU seconds (user + sys of the child: what a busy machine
    does not inflate), and the exit code."""
    walls, cpus, rc = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        rc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--recipes", nargs="*", default=["dsv4-flash-w4a16-bf16mtp", "dsv3-fp8-official"])
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="mtplint-bench-") as cache:
        env = dict(os.environ, MTPLINT_CACHE_DIR=cache, MTPLINT_ENVS_DIR=os.environ.get("MTPLINT_ENVS_DIR", ""))
        if not env["MTPLINT_ENVS_DIR"]:
            env.pop("MTPLINT_ENVS_DIR")
        bare, bare_cpu, _ = timed([py, "-c", "pass"], env, args.runs)
        imported, imported_cpu, _ = timed([py, "-c", "import mtplint.cli.app"], env, args.runs)
        print(f"{'':<25} {'wall':>7} {'cpu':>7}")
        print(f"{'python -c pass':<25} {bare:6.3f}s {bare_cpu:6.3f}s")
        print(f"{'import mtplint.cli.app':<25} {imported:6.3f}s {imported_cpu:6.3f}s  ({imported / bare:.1f}x bare)")
        for recipe in args.recipes:
            path = cached_build(recipe)
            argv = [py, "-m", "mtplint", str(path), "-q"]
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            first = time.perf_counter() - t0
            cached, cpu, rc = timed(argv, env, args.runs)
            print(
                f"{recipe:<25} {cached:6.3f}s {cpu:6.3f}s  cached lint, exit {rc} "
                f"({cached / bare:.1f}x bare; first lint {first:.1f} s)"
            )
            # -v and --format json are how findings are shown: the same remembered verdict.
            for shown in (["-v"], ["--format", "json"]):
                w, c, rc = timed([*argv, *shown], env, args.runs)
                print(f"{'':<25} {w:6.3f}s {c:6.3f}s  cached lint {' '.join(shown)}, exit {rc} ({w / bare:.1f}x bare)")
            # The same lint with its verdict forgotten: inventory memo, probe report and checks.
            forget = [py, "-c", f"import shutil; shutil.rmtree({str(Path(cache) / 'verdicts')!r}, True)"]
            walls, cpus = [], []
            for _ in range(args.runs):
                subprocess.run(forget, env=env)
                w, c, rc = timed(argv, env, 1)
                walls.append(w)
                cpus.append(c)
            w, c = statistics.median(walls), statistics.median(cpus)
            print(f"{'':<25} {w:6.3f}s {c:6.3f}s  verdict forgotten (report and memo cached), exit {rc}")


if __name__ == "__main__":
    main()
