"""Figures for `mtplint matrix --cluster` (issue 35). Prints numbers.

    .venv/bin/python scripts/bench_cluster.py [--releases 0.29.0,0.33.0] [--n 1,2,3,4]
        [--recipes qwen35-bf16-official,qwen35-mtp-advertised-not-shipped,glm45-air-mtp-dropped]
        [--nodes 2]

The same catalogue (default 3 checkpoints x 2 releases x 4 N = 24 cells) twice, each probing
every cell (--no-cache) from no probe worker (a cache and a worker directory of its own):
- on the local pool with --jobs equal to the cluster's slots;
- on a local Ray cluster (tests/support/ray_cluster.py: `ray start --head` plus NODES-1 node processes,
  one CPU each, on 127.0.0.1), timed from `mtplint matrix --cluster` starting to its report
  (connecting, actors, their probe workers and every cell; not the cluster's own start).
Prints cells per minute for each, the overhead ratio (target <= 10%), the per-cell costs the
cluster run reported (cold: a node's first cell of a release, which starts its probe worker;
warm: the rest) and the 6,000-cell estimate from them. Both runs see the same releases,
provisioned before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from ray_cluster import RayCluster, cluster_env  # noqa: E402

from fixtures.build import cached_build  # noqa: E402

MTPLINT = [sys.executable, "-m", "mtplint"]
CELL_LINE = re.compile(r"\] (?P<path>\S+) vllm=(?P<vllm>\S+) .*\(node \S+ (?P<node>\w+), (?P<s>[\d.]+) s\)$")


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, proc


def fresh_env(base: dict[str, str]) -> dict[str, str]:
    return {
        **base,
        "MTPLINT_CACHE_DIR": tempfile.mkdtemp(prefix="mtplint-bench-cache-"),
        "MTPLINT_WORKER_DIR": tempfile.mkdtemp(prefix="mtw-", dir="/tmp"),
    }


def stop_workers(env: dict[str, str]) -> None:
    from mtplint.probe.workers import stop_all

    stop_all(Path(env["MTPLINT_WORKER_DIR"]))
    for key in ("MTPLINT_WORKER_DIR", "MTPLINT_CACHE_DIR"):
        shutil.rmtree(env[key], ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", default="0.29.0,0.33.0")
    ap.add_argument("--n", default="1,2,3,4")
    ap.add_argument("--recipes", default="qwen35-bf16-official,qwen35-mtp-advertised-not-shipped,glm45-air-mtp-dropped")
    ap.add_argument("--nodes", type=int, default=2)
    a = ap.parse_args()
    from mtplint.envs.resolve import release_env

    for r in a.releases.split(","):
        release_env(r)  # provisioned before timing (None: the pinned one)
    paths = [str(cached_build(r)) for r in a.recipes.split(",")]
    cells = len(paths) * len(a.releases.split(",")) * len(a.n.split(","))
    matrix = [*MTPLINT, "matrix", *paths, "--vllm-commit", a.releases, "-n", a.n, "--no-cache", "--format", "json"]
    print(f"{cells} cells: {len(paths)} checkpoints x releases {a.releases} x n {a.n}; {os.cpu_count()} CPUs here")

    local_env = fresh_env(dict(os.environ))
    try:
        local_s, local = run([*matrix, "-j", str(a.nodes), "-q"], local_env)
    finally:
        stop_workers(local_env)
    print(f"local pool, --jobs {a.nodes}: {local_s:.1f} s, {cells / local_s * 60:.1f} cells/min")

    env = fresh_env(cluster_env())
    cluster = RayCluster(env, nodes=a.nodes)
    try:
        up = time.perf_counter()
        cluster.start()
        print(f"Ray cluster of {a.nodes} nodes x 1 CPU started in {time.perf_counter() - up:.1f} s (not counted)")
        ray_s, ray = run([*matrix, "--cluster", cluster.address], {**env, "CI": "1"})
    finally:
        cluster.stop()
        stop_workers(env)
    print(f"Ray cluster, {a.nodes} nodes x 1 slot: {ray_s:.1f} s, {cells / ray_s * 60:.1f} cells/min")
    print(f"overhead: cluster / local = {ray_s / local_s:.3f} ({(ray_s / local_s - 1) * 100:+.1f}%)")

    same = [c["findings"] for c in json.loads(ray.stdout)["cells"]] == [
        c["findings"] for c in json.loads(local.stdout)["cells"]
    ]
    print(f"findings identical cell for cell: {same}")

    seen: set[tuple[str, str]] = set()
    cold, warm = [], []
    for line in ray.stderr.splitlines():
        m = CELL_LINE.search(line)
        if not m:
            continue
        key = (m["node"], m["vllm"])
        (warm if key in seen else cold).append(float(m["s"]))
        seen.add(key)
    if cold and warm:
        w = statistics.median(warm)
        print(
            f"per cell on a node: cold (starts its release's probe worker) median {statistics.median(cold):.1f} s"
            f" (n={len(cold)}); warm median {w:.1f} s, mean {statistics.mean(warm):.1f} s (n={len(warm)})"
        )
        for nodes, slots in ((1, 4), (8, 4), (32, 4), (128, 4)):
            rate = nodes * slots * 60 / w
            print(
                f"6,000 cells on {nodes} node(s) x {slots} slots at the warm cost measured here: "
                f"~{6000 / rate:.0f} min (+ one cold start per node and release)"
            )


if __name__ == "__main__":
    main()
