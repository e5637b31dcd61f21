"""Test-session defaults: caches live in a temporary directory, not the user's ~/.cache."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config):
    if "MTPLINT_CACHE_DIR" not in os.environ:
        os.environ["MTPLINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtplint-test-cache-")
