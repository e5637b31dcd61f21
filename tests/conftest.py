"""Test-session defaults: caches live in a temporary directory, not the user's ~/.cache."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

# Tests are grouped by stage in folders; their shared helpers (tests/support: paths, recorded
# cases, the hub and Ray stand-ins) and the helpers one test module offers another
# (test_rule_cases_fast.lint_recorded, ...) are imported by module name from any folder.
_TESTS = Path(__file__).resolve().parent
sys.path[:0] = [
    str(_TESTS / "support"),
    *sorted(str(d) for d in _TESTS.iterdir() if d.is_dir() and any(d.glob("test_*.py"))),
]


def pytest_configure(config):
    # A CI runner sets CI=true, which turns on mtplint's timed progress lines on stderr; the tests
    # assert exact stderr, so they run as on a laptop and the progress test sets CI itself.
    os.environ.pop("CI", None)
    # Probe environments (vLLM releases, ~800 MB each) outlive a session: build/ is the tests' store.
    os.environ.setdefault("MTPLINT_ENVS_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "build", "envs"))
    # Fixture checkpoints are rebuilt only when their recipe or the factory changes (content hash).
    os.environ.setdefault(
        "MTPLINT_FIXTURE_CACHE", os.path.join(os.path.dirname(os.path.dirname(__file__)), "build", "fixtures")
    )
    if "MTPLINT_CACHE_DIR" not in os.environ:
        os.environ["MTPLINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtplint-test-cache-")
        # Inventory and declared-quantization memos outlive a session like the fixture builds:
        # an entry is keyed by what it was read from (path, stat, header hashes; the config's
        # content), so a rebuilt fixture misses by itself.
        for kind in ("inventory", "declared"):
            memo = Path(__file__).resolve().parent.parent / "build" / f"{kind}-memo"
            memo.mkdir(parents=True, exist_ok=True)
            os.symlink(memo, os.path.join(os.environ["MTPLINT_CACHE_DIR"], kind))
    # Probe workers (vLLM imported once, a child forked per probe) are shared by the session's
    # tests and stopped when it ends; a short path, as a socket's name must be.
    if "MTPLINT_WORKER_DIR" not in os.environ:
        os.environ["MTPLINT_WORKER_DIR"] = tempfile.mkdtemp(prefix="mtplint-w-")
        config._mtplint_worker_dir = os.environ["MTPLINT_WORKER_DIR"]


def pytest_unconfigure(config):
    where = getattr(config, "_mtplint_worker_dir", None)
    if where:
        from mtplint.probe.workers import stop_all

        stop_all(Path(where))
        shutil.rmtree(where, ignore_errors=True)
