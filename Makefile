# The README's two commands.
.PHONY: setup demo test bench

setup:
	bash scripts/setup.sh

# Lint the embedded example: a DeepSeek-V4-Flash W4A16 checkpoint whose MTP block is BF16.
demo: setup
	rm -rf build/demo
	.venv/bin/python -m fixtures build dsv4-flash-w4a16-bf16mtp build/demo
	.venv/bin/mtplint build/demo; test $$? -le 1

test: setup
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python scripts/bench_inventory.py
	.venv/bin/python scripts/bench_probe.py
