"""Cold and warm lint times and probe peak memory on full-size layouts. Prints numbers.

Usage: .venv/bin/python scripts/bench_probe.py [RECIPE ...]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixtures.build import cached_build

RECIPES = sys.argv[1:] or ["dsv4-flash-official", "dsv4-flash-w4a16-bf16mtp"]


def lint(path: Path, cache: str) -> tuple[float, int]:
    env = dict(os.environ, MTPLINT_CACHE_DIR=cache)
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", str(path), "-q", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    return time.perf_counter() - t, proc.returncode


def main() -> None:
    for recipe in RECIPES:
        path = cached_build(recipe)
        n = sum(1 for _ in path.glob("*.safetensors"))
        with tempfile.TemporaryDirectory() as cache:
            cold, rc = lint(path, cache)
            peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            warm = min(lint(path, cache)[0] for _ in range(3))
        print(
            f"{recipe}: {n} shards; cold lint {cold:.1f} s (exit {rc}), warm lint {warm:.2f} s "
            f"(best of 3), peak child RSS so far {peak_mib:.0f} MiB"
        )


if __name__ == "__main__":
    main()
