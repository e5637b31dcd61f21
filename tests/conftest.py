"""Test-session defaults: caches live in a temporary directory, not the user's ~/.cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


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
