"""On-disk module names by dotted suffix: the index answers as a scan of every name would."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mtplint.checks.exclusion_entries import ModuleNames

_NAME = st.lists(
    st.sampled_from(["model", "layers", "0", "61", "mtp", "experts", "w1", ""]), min_size=1, max_size=7
).map(".".join)


# Timing is not what this tests: on a shared 2-core machine under load, hypothesis's
# too_slow health check and per-example deadline failed runs whose property held.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(_NAME, max_size=20), st.lists(_NAME, max_size=8))
def test_ending_with_is_the_scan(names, entries):
    index = ModuleNames(names)
    for entry in entries:
        assert index.ending_with(entry) == [n for n in sorted(names) if n == entry or n.endswith("." + entry)]
