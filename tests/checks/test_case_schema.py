"""Case files are data a typo must not silently weaken: every key known, every value typed."""

from __future__ import annotations

import pytest
from recorded_cases import CaseError, load_cases

GOOD = '[[case]]\nid = "a"\nrecipe = "r"\nargs = []\nfires = ["MTP001"]\nsilent = []\n'


def test_every_shipped_case_file_is_valid():
    cases = load_cases()
    assert len(cases) > 100 and all(c["file"].endswith(".toml") for c in cases)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('fire = ["MTP002"]\n', "unknown key(s) fire"),
        ('max_errors = "0"\n', "max_errors must be a int, not str"),
        ('message_contains = "x"\n', "message_contains must be a dict"),
    ],
)
def test_a_wrong_key_or_type_is_an_error_naming_the_case(tmp_path, extra, says):
    (tmp_path / "MTP001.toml").write_text(GOOD + extra)
    with pytest.raises(CaseError, match=r"MTP001\.toml case 'a'") as err:
        load_cases(tmp_path)
    assert says in str(err.value)


def test_a_case_missing_what_it_asserts_and_a_duplicate_id_are_errors(tmp_path):
    (tmp_path / "MTP001.toml").write_text('[[case]]\nid = "a"\nrecipe = "r"\nargs = []\n')
    with pytest.raises(CaseError, match="missing fires, silent"):
        load_cases(tmp_path)
    (tmp_path / "MTP001.toml").write_text(GOOD)
    (tmp_path / "MTP002.toml").write_text(GOOD)
    with pytest.raises(CaseError, match=r"also in MTP001\.toml"):
        load_cases(tmp_path)
