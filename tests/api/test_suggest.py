"""The closest-name helper that "did you mean" messages share."""

from dlsched.core.suggest import closest, did_you_mean


def test_closest_finds_a_near_miss() -> None:
    assert closest("sai", ["sia", "gavel", "pollux"]) == "sia"
    assert closest("gavle", ["sia", "gavel", "pollux"]) == "gavel"


def test_closest_ignores_case_and_returns_the_choice_as_spelt() -> None:
    assert closest("SIA", ["sia", "Gavel"]) == "sia"
    assert closest("gavel", ["sia", "Gavel"]) == "Gavel"


def test_closest_returns_none_when_nothing_is_close() -> None:
    assert closest("zzzzzz", ["sia", "gavel"]) is None
    assert closest("sia", []) is None


def test_did_you_mean_phrase() -> None:
    assert did_you_mean("fifp", ["fifo", "sia"]) == " (did you mean 'fifo'?)"
    assert did_you_mean("qqqq", ["fifo"]) == ""
