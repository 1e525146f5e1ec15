"""TF-IDF cosine similarity, computed the way scikit-learn's TfidfVectorizer does.

InterCode's Bash reward (p3) fits ``TfidfVectorizer()`` on exactly two documents, the
agent's last observation and the gold output, and takes the cosine of their rows. Rather
than depend on scikit-learn for one number, this module reproduces its defaults:

- preprocessing: ``str.lower()``;
- tokens: ``re.findall(r"(?u)\\b\\w\\w+\\b", text)`` (Python ``re`` Unicode semantics, as
  scikit-learn itself uses ``re``);
- tf: raw counts; idf: smooth, ``ln((1 + n) / (1 + df)) + 1`` with ``n = 2`` documents;
- each row L2-normalised, so the cosine is the dot product of the two rows.

When neither text has a token, scikit-learn raises "empty vocabulary"; we return None
and let the caller decide (InterCode then compares the raw texts for equality).
"""

from __future__ import annotations

import math
import re
from collections import Counter

TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")

# With two documents a term's document frequency is 1 or 2, so only two idf values exist.
_DOCUMENT_COUNT = 2
_IDF_BY_DOCUMENT_FREQUENCY = {
    df: math.log((1 + _DOCUMENT_COUNT) / (1 + df)) + 1.0 for df in (1, 2)
}


def tokenize(text: str) -> list[str]:
    """The tokens scikit-learn's default analyzer would produce for ``text``."""
    return TOKEN_PATTERN.findall(text.lower())


def _normalized_weights(counts: Counter[str], other: Counter[str]) -> dict[str, float]:
    """L2-normalised tf-idf weights of one document, given the other for the df."""
    weights = {
        term: count * _IDF_BY_DOCUMENT_FREQUENCY[2 if term in other else 1]
        for term, count in counts.items()
    }
    norm = math.sqrt(math.fsum(weight * weight for weight in weights.values()))
    if norm == 0.0:
        return weights  # scikit-learn leaves all-zero rows as they are
    return {term: weight / norm for term, weight in weights.items()}


def tfidf_cosine(a: str, b: str) -> float | None:
    """Cosine between the TF-IDF rows of ``a`` and ``b`` fitted together.

    None means "empty vocabulary": neither text contains a token. A text without tokens
    facing one with tokens gives 0.0, as in scikit-learn (its row is all zeros).
    """
    counts_a = Counter(tokenize(a))
    counts_b = Counter(tokenize(b))
    if not counts_a and not counts_b:
        return None
    weights_a = _normalized_weights(counts_a, counts_b)
    weights_b = _normalized_weights(counts_b, counts_a)
    shared_terms = weights_a.keys() & weights_b.keys()
    return math.fsum(weights_a[term] * weights_b[term] for term in shared_terms)
