"""InterCode's Bash reward as pure functions: no containers, no I/O.

The environment gathers the facts (``git status`` of the agent's and the gold's
copies, md5 hashes of some paths, the two observations); these functions turn them into
the reward and a breakdown a human can read. The numbers follow InterCode's
``BashEnv.get_reward`` so that icplay's rewards are comparable with the published ones:

    reward = 0.01 + p1 + p2 + p3          (summed in this order, as InterCode does)
    p1 = round(0.33 * (1 - erf(#missing + #extra)), 2)
    p2 = 0.33 if no common (status, path) pair has status A, ?? or C,
         else round(0.33 * same / total, 2)
    p3 = round(0.33 * cosine, 2)          (TF-IDF cosine of the observations, else equality)

``missing`` and ``extra`` are set differences of (status, path) pairs, so a pair listed
twice counts once. The most the parts add up to is exactly 1.0 in floating point; the
cap at 1.0 only guards that. InterCode does not round the total (0.01 + 0.05 + 0.33 +
0.33 is 0.7200000000000001 there too), and neither do we, so totals compare exactly.

Where icplay's parser differs from InterCode's: InterCode splits the whole status text on
whitespace and pairs the tokens, which mangles renames (``R  old -> new``) and crashes on
quoted paths with spaces. ``bash_facts.parse_porcelain`` reads ``git status --porcelain -z``
instead; on ordinary output (one unquoted path per line) both give the same pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from icplay.envs.tfidf import tfidf_cosine

BASE_REWARD = 0.01
PART_WEIGHT = 0.33
MAX_REWARD = 1.0
# InterCode checks the contents of common changes only for these statuses.
CONTENT_CHECKED_STATUSES = frozenset({"A", "??", "C"})

Change = tuple[str, str]  # (status, path)


@dataclass
class BashReward:
    """The reward and the facts behind each of its parts."""

    reward: float
    p1: float                      # file-system diff
    p2: float                      # contents of paths both sides added
    p3: float                      # answer similarity
    missing: list[Change] = field(default_factory=list)   # in the gold's changes only
    extra: list[Change] = field(default_factory=list)     # in the agent's changes only
    same_content: list[str] = field(default_factory=list)
    different_content: list[str] = field(default_factory=list)
    cosine: float = 0.0            # the answer similarity p3 was computed from
    empty_vocabulary: bool = False  # neither observation had a token (equality was used)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready breakdown (pairs as two-element lists)."""
        return {
            "reward": self.reward,
            "p1": self.p1,
            "p2": self.p2,
            "p3": self.p3,
            "missing": [list(change) for change in self.missing],
            "extra": [list(change) for change in self.extra],
            "same_content": list(self.same_content),
            "different_content": list(self.different_content),
            "cosine": self.cosine,
            "empty_vocabulary": self.empty_vocabulary,
        }


# --- content hashing --------------------------------------------------------------------


def paths_to_hash(agent_changes: Iterable[Change], gold_changes: Iterable[Change]) -> list[str]:
    """The paths p2 compares: common (status, path) pairs whose status is A, ?? or C."""
    common = set(agent_changes) & set(gold_changes)
    return sorted({path for status, path in common if status in CONTENT_CHECKED_STATUSES})


# --- the reward -------------------------------------------------------------------------


def file_diff_score(mismatch_count: int) -> float:
    """p1: 0.33 for identical change lists, 0.05 for one mismatch, 0 from two on."""
    return round(PART_WEIGHT * (1 - math.erf(mismatch_count)), 2)


def bash_reward(
    agent_changes: Iterable[Change],
    gold_changes: Iterable[Change],
    agent_hashes: Mapping[str, str],
    gold_hashes: Mapping[str, str],
    agent_observation: str | None,
    gold_observation: str | None,
) -> BashReward:
    """InterCode's reward for one submit, from facts the environment collected.

    ``agent_hashes`` and ``gold_hashes`` map each path of :func:`paths_to_hash` to its hash
    output in each copy. A path missing from a mapping compares as None, so a path absent
    from both counts as the same, as InterCode's identical error outputs did.
    """
    agent_set = set(agent_changes)
    gold_set = set(gold_changes)

    missing = sorted(gold_set - agent_set)
    extra = sorted(agent_set - gold_set)
    p1 = file_diff_score(len(missing) + len(extra))

    same_content: list[str] = []
    different_content: list[str] = []
    for path in paths_to_hash(agent_set, gold_set):
        if agent_hashes.get(path) == gold_hashes.get(path):
            same_content.append(path)
        else:
            different_content.append(path)
    checked = len(same_content) + len(different_content)
    p2 = PART_WEIGHT if checked == 0 else round(PART_WEIGHT * (len(same_content) / checked), 2)

    both_observed = agent_observation is not None and gold_observation is not None
    vector_cosine = (tfidf_cosine(agent_observation, gold_observation)
                     if agent_observation is not None and gold_observation is not None else None)
    empty_vocabulary = both_observed and vector_cosine is None
    if vector_cosine is None:
        # InterCode's fallback when its vectorizer raises (no token on either side) or an
        # observation is missing (a gold command that could not run): exact equality
        cosine = 1.0 if agent_observation == gold_observation else 0.0
    else:
        cosine = vector_cosine
    p3 = round(PART_WEIGHT * cosine, 2)

    reward = min(MAX_REWARD, BASE_REWARD + p1 + p2 + p3)
    return BashReward(
        reward=reward, p1=p1, p2=p2, p3=p3,
        missing=missing, extra=extra,
        same_content=same_content, different_content=different_content,
        cosine=cosine, empty_vocabulary=empty_vocabulary,
    )
