"""InterCode-Python's reward over test outcomes, against hand-computed cases, and its strict verdict."""

from __future__ import annotations

from icplay.python.reward import CUT, Outcome, Scored, gold_function_name, python_reward

OK = Outcome("ok", "")
FAIL = Outcome("error", "AssertionError")


def scored(*outcomes: Outcome, whole: tuple[int, ...] = ()) -> Scored:
    return Scored(list(outcomes), [[] for _ in outcomes], [n in whole for n in range(len(outcomes))])


def reward_of(yours: list[Outcome], gold: list[Outcome]) -> float:
    return python_reward([f"t{n}" for n in range(len(gold))], scored(*yours), scored(*gold))[0]


def test_the_gold_function_is_the_one_the_tests_call():
    gold = "def is_Power_Of_Two (x): \r\n    return x and (not(x & (x - 1))) \r\ndef differ_At_One_Bit_Pos(a,b): \r\n    return 1"
    assert gold_function_name(gold, ["assert differ_At_One_Bit_Pos(13,9) == True"]) == "differ_At_One_Bit_Pos"
    assert gold_function_name("R = 3\ndef min_cost(c, m, n):\n    return 1", ["assert min_cost([], 2, 2) == 8"]) == "min_cost"
    # no test names a function: the last one defined; nested defs do not count
    assert gold_function_name("def a():\n    def inner(): pass\ndef b(): pass", ["assert True"]) == "b"
    assert gold_function_name("x = 1", ["assert x"]) is None


def test_all_matching_scores_one_and_is_strictly_solved():
    reward, b, reasons = python_reward(["t1", "t2", "t3"], scored(OK, OK, OK), scored(OK, OK, OK))
    assert reward == 1.0 and b["passed"] == 3 and b["total"] == 3 and reasons == []


def test_the_fraction_of_matching_outcomes():
    reward, b, _ = python_reward(["t1", "t2", "t3"], scored(OK, FAIL, OK), scored(OK, OK, OK))
    assert reward == 2 / 3 and [r["match"] for r in b["tests"]] == [True, False, True]


def test_failing_the_way_the_gold_fails_matches_but_is_never_strictly_solved():
    # InterCode compares outcomes, not passes: a gold failing its own test sets the bar
    assert reward_of([FAIL, OK], [FAIL, FAIL]) == 0.5
    reward, _, reasons = python_reward(["t1"], scored(FAIL), scored(FAIL))
    assert reward == 1.0 and reasons == ["the gold itself does not pass test 1 (error): matching it proves nothing"]


def test_a_test_run_whole_in_the_solvers_interpreter_is_never_strictly_solved():
    reward, b, reasons = python_reward(["t1", "t2"], scored(OK, OK, whole=(1,)), scored(OK, OK))
    assert reward == 1.0 and b["tests"][1]["whole"] and len(reasons) == 1 and "test 2" in reasons[0]


def test_the_printed_output_and_the_error_line_both_count():
    yours = [Outcome("ok", "3\n"), Outcome("error", "NameError: name 'f' is not defined")]
    gold = [Outcome("ok", "4\n"), Outcome("error", "AssertionError")]
    assert reward_of(yours, gold) == 0.0


def test_a_cut_died_or_opaque_test_matches_nothing_not_even_its_like():
    for status in (CUT, "died", "opaque"):
        same = Outcome(status, "partial")
        assert reward_of([same], [same]) == 0.0
        assert reward_of([same], [OK]) == 0.0


def test_no_tests_scores_zero():
    assert python_reward([], scored(), scored())[0] == 0.0


def test_a_printed_test_matched_with_other_values_is_not_strictly_solved():
    # print(f(5)) shows "10" for a function printing "1" and returning 0 as for one returning 10
    printed = Outcome("ok", "10\n")
    mine = Scored([printed], [["0"]], [False], [['["value", "1", {"value": "[\\"int\\", \\"0\\"]"}]']])
    theirs = Scored([printed], [["10"]], [False], [['["value", "", {"value": "[\\"int\\", \\"a\\"]"}]']])
    reward, _, reasons = python_reward(["print(f(5))"], mine, theirs)
    assert reward == 1.0 and reasons == ["test 1 matched on printed text, but its calls' results differ from the gold's"]
    same = Scored([printed], [["10"]], [False], theirs.results)
    assert python_reward(["print(f(5))"], same, theirs)[2] == []
