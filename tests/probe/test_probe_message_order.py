"""vLLM messages that print a set of names are recorded in one order: a set's iteration order
follows the process's string hashing, and a probe report must not change between probes."""

from __future__ import annotations

from mtplint.probe.child.dryrun import _set_sorted


def test_a_trailing_set_of_names_is_sorted():
    message = "There is no module or parameter named 'mtp' in M. The available parameters are: {'b.w', 'a.w', 'c.w'}"
    assert _set_sorted(message).endswith("are: {'a.w', 'b.w', 'c.w'}")


def test_the_order_does_not_depend_on_how_the_set_iterated():
    one = "Following weights were not initialized from checkpoint: {'x.weight', 'y.weight'}"
    other = "Following weights were not initialized from checkpoint: {'y.weight', 'x.weight'}"
    assert _set_sorted(one) == _set_sorted(other)


def test_other_messages_are_kept_as_they_are():
    for message in (
        "KeyError: 'layers.0.mlp.experts.w13_weight'",
        "cut short: {'a', 'b'",  # a message truncated before its set ends
        "not a set of names: {1: 2}",
    ):
        assert _set_sorted(message) == message
