"""What runs inside the probed vLLM's interpreter: the probe child (`python -m mtplint.probe.child`) and
the fork-server worker. Imports only `mtplint.core`, `mtplint.patches`, the report contract
(`mtplint.probe.report`), `mtplint.probe.lifecycle` and `mtplint.probe.phases` (tests/architecture/test_layering.py)."""
