"""Time `mtplint verify` on a fixture, twice (the first with an empty mtplint cache: cold; the second with the probe
report and inventory cached: warm; the engine is a fresh child process both times), and print the split:
lint, twin build, engine import, engine start, generation, total.

    python scripts/bench_verify.py [RECIPE] [--trust-remote-code] [--budget S]

Exits 1 when the warm total is over the budget (#33: 30 s for GLM-4.5-Air official on this
2-core machine; measured 26.9 s warm, 122.1 s cold, acceptance 1.00, under the other sessions' load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.build import cached_build  # noqa: E402

KEYS = ("lint", "twin", "import", "start", "generate", "total")


def run(path: Path, trust: bool, env: dict[str, str]) -> dict[str, float]:
    cmd = [sys.executable, "-m", "mtplint", "verify", str(path), "--format", "json"]
    proc = subprocess.run([*cmd, *(["--trust-remote-code"] if trust else [])], capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"verify exited {proc.returncode}: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    print(f"  engine {out['engine']['load']}, acceptance {out['engine']['acceptance']}, agree {out['agree']}")
    return out["timings"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", nargs="?", default="glm45-air-bf16-official")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds a warm verify may take")
    ap.add_argument("--trust-remote-code", action="store_true")
    a = ap.parse_args()
    trust = a.trust_remote_code or a.recipe.startswith("mimo")
    path = cached_build(a.recipe)
    with tempfile.TemporaryDirectory() as cache:
        from mtplint.envs import store

        # An empty cache (no probe report, no worker, no inventory memo); the same engine environment.
        env = {**os.environ, "MTPLINT_CACHE_DIR": cache, "MTPLINT_ENVS_DIR": str(store.root())}
        for label in ("cold", "warm"):
            t = run(path, trust, env)
            print(f"{label}: " + ", ".join(f"{k} {t.get(k, 0):.1f} s" for k in KEYS))
    if t.get("total", 0) > a.budget:
        print(f"warm verify took {t['total']:.1f} s, over the {a.budget:.0f} s budget")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
