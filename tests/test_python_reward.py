"""InterCode-Python's reward over test outcomes, against hand-computed cases."""

from __future__ import annotations

from icplay.python.reward import CUT, Outcome, gold_function_name, python_reward

OK = Outcome("ok", "")
FAIL = Outcome("error", "AssertionError")


def test_the_gold_function_is_the_one_the_tests_call():
    gold = "def is_Power_Of_Two (x): \r\n    return x and (not(x & (x - 1))) \r\ndef differ_At_One_Bit_Pos(a,b): \r\n    return 1"
    assert gold_function_name(gold, ["assert differ_At_One_Bit_Pos(13,9) == True"]) == "differ_At_One_Bit_Pos"
    assert gold_function_name("R = 3\ndef min_cost(c, m, n):\n    return 1", ["assert min_cost([], 2, 2) == 8"]) == "min_cost"
    # no test names a function: the last one defined; nested defs do not count
    assert gold_function_name("def a():\n    def inner(): pass\ndef b(): pass", ["assert True"]) == "b"
    assert gold_function_name("x = 1", ["assert x"]) is None


def test_all_matching_scores_one():
    reward, b = python_reward(["t1", "t2", "t3"], [OK, OK, OK], [OK, OK, OK])
    assert reward == 1.0 and b["passed"] == 3 and b["total"] == 3


def test_the_fraction_of_matching_outcomes():
    reward, b = python_reward(["t1", "t2", "t3"], [OK, FAIL, OK], [OK, OK, OK])
    assert reward == 2 / 3 and [r["match"] for r in b["tests"]] == [True, False, True]


def test_failing_the_way_the_gold_fails_matches():
    # InterCode compares outcomes, not passes: a gold failing its own test sets the bar
    reward, _ = python_reward(["t1", "t2"], [FAIL, OK], [FAIL, FAIL])
    assert reward == 0.5


def test_the_printed_output_and_the_error_line_both_count():
    yours = [Outcome("ok", "3\n"), Outcome("error", "NameError: name 'f' is not defined")]
    gold = [Outcome("ok", "4\n"), Outcome("error", "AssertionError")]
    assert python_reward(["t1", "t2"], yours, gold)[0] == 0.0


def test_a_cut_test_matches_nothing_not_even_a_cut_gold():
    cut = Outcome(CUT, "partial")
    assert python_reward(["t"], [cut], [cut])[0] == 0.0
    assert python_reward(["t"], [cut], [OK])[0] == 0.0


def test_no_tests_scores_zero():
    assert python_reward([], [], [])[0] == 0.0
