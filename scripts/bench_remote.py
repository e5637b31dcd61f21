"""Lint a hub repository header-only against linting the same checkpoint locally.

    python scripts/bench_remote.py [RECIPE] [--repeat N]

Serves the fixture recipe (default: dsv4-flash-w4a16-bf16mtp, the full DeepSeek-V4-Flash layout,
46 shards, ~166 GB logical) from tests/support/hub_server.py on 127.0.0.1 and runs `mtplint` in child
processes with one probe cache, so every run after the first is a probe-cache hit and the times
compare what differs: reading the inventory. Prints requests, bytes and seconds per run: local
with its inventory read from the shards and from the memo, the hub repository cold (fresh hub
cache and memo) and warm (the same commit again), and whether the findings agree.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from hub_server import HubServer  # noqa: E402

from fixtures.build import cached_build, manifest  # noqa: E402

MTPLINT = [sys.executable, "-m", "mtplint"]


def run(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([*MTPLINT, *args, "--format", "json", "-q"], capture_output=True, text=True, env=env)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mtplint {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return took, json.loads(proc.stdout)


def findings(report: dict) -> list[tuple]:
    return [(f["id"], f["severity"], f["message"]) for f in report["findings"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", nargs="?", default="dsv4-flash-w4a16-bf16mtp")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the median is shown)")
    opts = parser.parse_args()
    ckpt = cached_build(opts.recipe)
    logical = manifest(ckpt)["logical_bytes"]
    work = Path(tempfile.mkdtemp(prefix="mtplint-bench-remote-"))
    try:
        with HubServer() as hub:
            hub.add("bench/ckpt", ckpt)
            env = hub.env(work / "hf-home")
            env["MTPLINT_CACHE_DIR"] = str(work / "mtplint-cache")
            memo = work / "mtplint-cache" / "inventory"
            _, local_report = run([str(ckpt)], env)  # probes once; every later run is a cache hit
            rows = []

            def measure(label: str, args: list[str], before) -> dict:
                times, report = [], {}
                for _ in range(opts.repeat):
                    before()
                    hub.reset()
                    took, report = run(args, env)
                    times.append(took)
                stats = hub.stats()
                row = {
                    "run": label,
                    "seconds": statistics.median(times),
                    "requests": stats["by_kind"],
                    "bytes": stats["bytes"],
                    "same": findings(report) == findings(local_report),
                }
                rows.append(row)
                return row

            def cold_hub() -> None:
                shutil.rmtree(memo, ignore_errors=True)
                shutil.rmtree(work / "hf-home", ignore_errors=True)

            measure("local, headers read", [str(ckpt)], lambda: shutil.rmtree(memo, ignore_errors=True))
            measure("local, memo", [str(ckpt)], lambda: None)
            measure("hf:// cold", ["hf://bench/ckpt"], cold_hub)
            measure("hf:// warm", ["hf://bench/ckpt"], lambda: None)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{opts.recipe}: {manifest(ckpt)['shards']} shards, {logical / 1e9:.1f} GB logical; median of {opts.repeat}")
    print(f"{'run':<22}{'seconds':>9}{'x local':>9}{'bytes':>14}{'% logical':>11}  {'requests':<32}same findings")
    base = {"hf:// cold": rows[0]["seconds"], "hf:// warm": rows[1]["seconds"]}
    for r in rows:
        ratio = r["seconds"] / base[r["run"]] if r["run"] in base else 1.0
        kinds = ", ".join(f"{k} {n}" for k, n in r["requests"].items()) or "none"
        print(
            f"{r['run']:<22}{r['seconds']:>9.2f}{ratio:>9.2f}{r['bytes']:>14,}{100 * r['bytes'] / logical:>10.4f}%"
            f"  {kinds:<32}{r['same']}"
        )
    print("(x local: cold against local with headers read, warm against local from the memo)")
    ok = all(r["same"] for r in rows) and all(r["bytes"] < logical / 100 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
