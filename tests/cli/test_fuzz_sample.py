"""A bounded run of scripts/fuzz_inputs.py (issue #16 "Done when"): 2,000 mutated headers, indexes
and configs through load_inventory, with a fixed seed. No exception other than BadInput, no header
verdict that differs from the safetensors package. The full run is `scripts/fuzz_inputs.py`."""

from __future__ import annotations

import sys
import time

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

from fuzz_inputs import KINDS, fuzz, report


@pytest.mark.slow
def test_fuzz_sample(tmp_path):
    t0 = time.monotonic()
    tallies = fuzz(2000, seed=16, work_dir=str(tmp_path))
    wall = time.monotonic() - t0
    assert report(tallies, wall, "off"), "see the examples printed above"
    assert sum(t.inputs for t in tallies.values()) == 2000
    for kind in KINDS:
        t = tallies[kind]
        assert t.other == 0 and t.diffs == 0, (kind, t.examples)
        # Both outcomes occur, or the sample exercises one side only and could not fail on the other.
        assert t.accepted > t.inputs // 10 and t.bad_input > t.inputs // 10, (kind, t)
    assert tallies["header"].oracle_checked == tallies["header"].inputs
