"""The reward functions against the shared reference vectors and the edge cases.

The vectors come from InterCode's own code (scikit-learn's TfidfVectorizer, scipy's
kendalltau), so matching them is what makes icplay's rewards comparable with published
numbers. The edge cases cover what the vectors do not: parsing, caps, undefined tau,
and the O(n log n) bound, checked by counting operations rather than timing.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from icplay.envs import sql_reward as sql_reward_module
from icplay.envs.bash_reward import (
    BashReward,
    bash_reward,
    file_diff_score,
    paths_to_hash,
)
from icplay.envs.sql_reward import (
    kendall_tau_b,
    kendall_tau_b_with_work,
    non_result_reward,
    row_key,
    sql_reward,
)
from icplay.envs.tfidf import tfidf_cosine, tokenize

VECTORS = Path(__file__).resolve().parents[1].parent / "shared" / "vectors"


def load_vectors(name: str) -> list[dict]:
    if not VECTORS.is_dir():
        pytest.skip(f"reference vectors not found at {VECTORS} (the shared folder is absent)")
    with open(VECTORS / name, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# --- TF-IDF -----------------------------------------------------------------------------


def test_tfidf_matches_every_reference_case():
    cases = load_vectors("tfidf_cosine.jsonl")
    assert len(cases) == 485
    mismatches = []
    for number, case in enumerate(cases):
        cosine = tfidf_cosine(case["a"], case["b"])
        if case["empty_vocabulary"]:
            ok = cosine is None
        else:
            ok = cosine is not None and abs(cosine - case["cosine"]) <= 1e-9
        if not ok:
            mismatches.append((number, case["cosine"], cosine))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def test_tfidf_empty_vocabulary_is_none():
    assert tfidf_cosine("", "") is None
    # Single characters are not tokens under (?u)\b\w\w+\b.
    assert tfidf_cosine("a b c 1 2", "- x ;") is None


def test_tfidf_one_side_without_tokens_is_zero():
    assert tfidf_cosine("", "hello world") == 0.0
    assert tfidf_cosine("hello world", "!") == 0.0


def test_tfidf_identical_and_case_insensitive():
    assert tfidf_cosine("Hello World", "hello world") == pytest.approx(1.0, abs=1e-12)


def test_tfidf_weights_shared_terms_lower():
    # "aa" is in both (idf 1), "bb" only in the first (idf 1 + ln 1.5).
    idf_unique = 1 + math.log(1.5)
    expected = 1 / math.sqrt(1 + idf_unique**2)
    assert tfidf_cosine("aa bb", "aa") == pytest.approx(expected, abs=1e-12)


def test_tokenize_follows_python_unicode_word_rules():
    assert tokenize("ÉCOLE file_name x 42") == ["école", "file_name", "42"]


# --- Bash reward ------------------------------------------------------------------------


def test_paths_to_hash_only_common_added_untracked_or_copied():
    agent = [("??", "out/"), ("A", "x.txt"), ("M", "y.txt"), ("C", "z.txt"), ("??", "only_agent")]
    gold = [("??", "out/"), ("A", "x.txt"), ("M", "y.txt"), ("C", "z.txt"), ("A", "only_agent")]
    assert paths_to_hash(agent, gold) == ["out/", "x.txt", "z.txt"]
    assert paths_to_hash([], gold) == []


def test_nothing_changed_and_empty_outputs_is_a_perfect_score():
    result = bash_reward([], [], {}, {}, "", "")
    assert (result.p1, result.p2, result.p3) == (0.33, 0.33, 0.33)
    assert result.reward == 1.0
    assert result.empty_vocabulary
    assert result.cosine == 1.0


def test_empty_agent_output_against_a_real_answer():
    result = bash_reward([], [], {}, {}, "", "42 files\n")
    assert result.p3 == 0.0
    assert result.reward == pytest.approx(0.67)


def test_p1_values():
    assert file_diff_score(0) == 0.33
    assert file_diff_score(1) == 0.05
    assert file_diff_score(2) == 0.0
    assert file_diff_score(50) == 0.0


def test_p2_is_full_when_no_common_added_path():
    # The agent modified a file, the gold deleted another: nothing to hash.
    result = bash_reward([("M", "a.txt")], [("D", "b.txt")], {}, {}, "ok", "ok")
    assert result.p2 == 0.33
    assert result.p1 == 0.0
    assert sorted(result.missing) == [("D", "b.txt")]
    assert sorted(result.extra) == [("M", "a.txt")]
    assert result.same_content == [] and result.different_content == []


def test_p2_counts_matching_hashes():
    changes = [("??", "a.txt"), ("??", "b.txt"), ("A", "c.txt")]
    agent_hashes = {"a.txt": "1", "b.txt": "2", "c.txt": "3"}
    gold_hashes = {"a.txt": "1", "b.txt": "X", "c.txt": "Y"}
    result = bash_reward(changes, changes, agent_hashes, gold_hashes, "", "")
    assert result.same_content == ["a.txt"]
    assert result.different_content == ["b.txt", "c.txt"]
    assert result.p2 == round(0.33 / 3, 2) == 0.11
    assert result.p1 == 0.33


def test_p2_path_unhashed_on_both_sides_counts_as_same():
    changes = [("??", "a.txt")]
    assert bash_reward(changes, changes, {}, {}, "", "").p2 == 0.33


def test_duplicate_status_lines_count_once():
    gold = [("??", "a.txt")]
    agent = [("??", "a.txt"), ("??", "a.txt")]
    result = bash_reward(agent, gold, {"a.txt": "h"}, {"a.txt": "h"}, "x", "")
    assert result.missing == [] and result.extra == []
    assert result.p1 == 0.33


def test_total_is_capped_and_exact_at_one():
    text = "alpha beta gamma " * 50
    result = bash_reward([("??", "a.txt")], [("??", "a.txt")], {"a.txt": "h"}, {"a.txt": "h"}, text, text)
    assert result.reward == 1.0
    assert result.reward <= 1.0


def test_total_is_not_rounded_like_intercode():
    result = bash_reward([], [("??", "x.txt")], {}, {}, "same words here", "same words here")
    assert (result.p1, result.p2, result.p3) == (0.05, 0.33, 0.33)
    assert result.reward == 0.01 + 0.05 + 0.33 + 0.33


def test_bash_reward_to_dict_is_json_ready():
    result = bash_reward([("??", "a b.txt")], [], {}, {}, "out", "out")
    assert isinstance(result, BashReward)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["extra"] == [["??", "a b.txt"]]
    assert set(data) >= {"reward", "p1", "p2", "p3", "missing", "extra", "same_content",
                         "different_content", "cosine"}


def test_bash_reward_falls_back_to_equality_without_a_token_or_an_observation():
    """InterCode's fallback when its vectorizer raises or an observation is missing."""
    def cosine(agent, gold):
        return bash_reward([], [], {}, {}, agent, gold).cosine
    assert (cosine("!", "!"), cosine("!", "?"), cosine(None, None), cosine("some output", None)) == (1.0, 0.0, 1.0, 0.0)


def test_bash_reward_missing_gold_output():
    result = bash_reward([], [], {}, {}, "anything", None)
    assert result.p3 == 0.0 and not result.empty_vocabulary


# --- SQL reward -------------------------------------------------------------------------


def test_sql_matches_every_reference_case():
    cases = load_vectors("sql_reward.jsonl")
    assert len(cases) == 400
    mismatches = []
    for number, case in enumerate(cases):
        result = sql_reward(case["agent_rows"], case["gold_rows"])
        if result.reward != case["reward"] or result.kendall_tau_b != case["kendall_tau_b"]:
            mismatches.append((number, case["reward"], result.reward, case["kendall_tau_b"], result.kendall_tau_b))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def test_sql_both_empty_is_one():
    result = sql_reward([], [])
    assert result.reward == 1.0 and result.iou == 1.0 and result.kendall_tau_b is None


def test_sql_one_side_empty_or_disjoint_is_zero():
    assert sql_reward([], [(1,)]).reward == 0.0
    assert sql_reward([(1,)], []).reward == 0.0
    assert sql_reward([(1,), (2,)], [(3,)]).reward == 0.0


def test_sql_reversed_order_is_negative():
    rows = [(1, "a"), (2, "b"), (3, "c")]
    result = sql_reward(list(reversed(rows)), rows)
    assert result.iou == 1.0
    assert result.kendall_tau_b == -1.0
    assert result.reward == -1.0


def test_sql_same_order_with_extra_rows():
    result = sql_reward([(1,), (2,), (3,), (4,)], [(1,), (2,), (3,)])
    assert result.iou == 0.75 and result.kendall_tau_b == 1.0 and result.reward == 0.75


def test_sql_rows_compare_as_strings_of_tuples():
    assert row_key([1, "a"]) == "(1, 'a')"
    assert sql_reward([(1,)], [("1",)]).reward == 0.0
    assert sql_reward([(1,)], [(1.0,)]).reward == 0.0
    assert sql_reward([[1, None]], [(1, None)]).reward == 1.0


def test_sql_duplicates_are_a_multiset():
    result = sql_reward([(1,), (1,), (1,)], [(1,)])
    assert result.shared == 1 and result.agent_count == 3 and result.gold_count == 1
    assert result.iou == pytest.approx(1 / 3)


def test_sql_undefined_tau_keeps_the_unrounded_iou():
    # One shared row: tau-b undefined, InterCode keeps the IoU as it is.
    result = sql_reward([(1,), (2,), (3,)], [(1,)])
    assert result.kendall_tau_b is None
    assert result.reward == 1 / 3
    # All shared rows identical: every pair tied, tau-b undefined again.
    result = sql_reward([("x",)] * 9, [("x",)] * 5)
    assert result.kendall_tau_b is None
    assert result.reward == 5 / 9


def test_sql_tau_uses_repeated_shared_rows():
    # A shared row occurring twice on both sides is kept twice on each side.
    agent = [("b",), ("a",), ("a",)]
    gold = [("a",), ("a",), ("b",)]
    expected = naive_tau_b([row_key(r) for r in agent], [row_key(r) for r in gold])
    result = sql_reward(agent, gold)
    # Keeping each shared row only once would give [b, a] against [a, b]: tau -1.
    assert result.kendall_tau_b == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(-0.5)
    assert result.reward == -0.5


def test_non_result_reward_is_zero():
    result = non_result_reward(gold_count=3)
    assert result.reward == 0.0 and result.gold_count == 3
    assert json.loads(json.dumps(result.to_dict()))["reward"] == 0.0


# --- Kendall's tau-b --------------------------------------------------------------------


def naive_tau_b(x, y):
    """The textbook O(n^2) definition, to check the fast one against."""
    concordant = discordant = x_only_ties = y_only_ties = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx = (x[i] > x[j]) - (x[i] < x[j])
        dy = (y[i] > y[j]) - (y[i] < y[j])
        if dx and dy:
            if dx == dy:
                concordant += 1
            else:
                discordant += 1
        elif dx:
            y_only_ties += 1
        elif dy:
            x_only_ties += 1
    denominator = math.sqrt((concordant + discordant + y_only_ties) * (concordant + discordant + x_only_ties))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def test_kendall_tau_b_matches_the_definition_on_random_data_with_ties():
    generator = random.Random(7)
    for _ in range(300):
        size = generator.randint(0, 25)
        x = [generator.randint(0, 4) for _ in range(size)]
        y = [generator.randint(0, 4) for _ in range(size)]
        expected = naive_tau_b(x, y)
        actual = kendall_tau_b(x, y)
        if expected is None:
            assert actual is None, (x, y)
        else:
            assert actual == pytest.approx(expected, abs=1e-12), (x, y)


def test_kendall_tau_b_undefined_cases():
    assert kendall_tau_b([], []) is None
    assert kendall_tau_b(["a"], ["a"]) is None
    assert kendall_tau_b(["a", "a"], ["a", "b"]) is None
    assert kendall_tau_b(["a", "b"], ["c", "c"]) is None
    with pytest.raises(ValueError):
        kendall_tau_b([1], [1, 2])


class CountingValue:
    """A value that counts the comparisons and hashes made on it."""

    operations = 0

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        CountingValue.operations += 1
        return self.value < other.value

    def __eq__(self, other):
        CountingValue.operations += 1
        return self.value == other.value

    def __hash__(self):
        CountingValue.operations += 1
        return hash(self.value)


def n_log_n(size: int) -> int:
    return size * math.ceil(math.log2(size))


def test_kendall_tau_b_is_n_log_n_by_counting():
    size = 100_000
    generator = random.Random(3)
    x = [CountingValue(i) for i in range(size)]
    y = [CountingValue(generator.randrange(size)) for _ in range(size)]
    CountingValue.operations = 0
    tau, moves = kendall_tau_b_with_work(x, y)
    assert tau is not None
    assert moves <= n_log_n(size)
    # Sorting the distinct values and ranking: a few comparisons/hashes per n log n.
    assert CountingValue.operations <= 3 * n_log_n(size)


def test_sql_reward_on_100k_rows_stays_n_log_n(monkeypatch):
    size = 100_000
    agent_rows = [(i % 1000, f"name{i % 37}") for i in range(size)]
    gold_rows = list(agent_rows)
    random.Random(5).shuffle(gold_rows)
    recorded_moves = []
    real = sql_reward_module.kendall_tau_b_with_work

    def recording(x, y):
        tau, moves = real(x, y)
        recorded_moves.append((len(x), moves))
        return tau, moves

    monkeypatch.setattr(sql_reward_module, "kendall_tau_b_with_work", recording)
    result = sql_reward(agent_rows, gold_rows)
    assert result.iou == 1.0 and result.shared == size
    assert recorded_moves and recorded_moves[0][0] == size
    assert recorded_moves[0][1] <= n_log_n(size)
    assert -1.0 <= result.kendall_tau_b <= 1.0
