"""Tokenising and ranking for recall. Pure: BM25 over the store's statistics, plus recency."""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
        "you",
        "your",
    )
)
MAX_TERM_BYTES = 64  # longer "words" are cut: they are noise, and LMDB keys are bounded

BM25_K1 = 1.2
BM25_B = 0.75
RECENCY_HALF_LIFE_SECS = 7 * 86_400.0
RECENCY_WEIGHT = 0.25  # a brand-new record scores up to 25% above an ancient equal match


def tokenize(text: str) -> list[str]:
    """Lower-cased words without stopwords, each at most MAX_TERM_BYTES of UTF-8."""
    out = []
    for match in _WORD.finditer(text.casefold()):
        word = match.group()
        if word in STOPWORDS:
            continue
        encoded = word.encode()
        if len(encoded) > MAX_TERM_BYTES:
            word = encoded[:MAX_TERM_BYTES].decode(errors="ignore")
        out.append(word)
    return out


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    terms = tokenize(text)
    return Counter(terms), len(terms)


def idf(docs: int, df: int) -> float:
    """BM25's idf, floored at a small positive value so common terms still count a little."""
    return max(math.log(1 + (docs - df + 0.5) / (df + 0.5)), 1e-6)


def bm25(tf: int, doc_len: int, avg_len: float, term_idf: float) -> float:
    norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * doc_len / max(avg_len, 1e-9))
    return term_idf * tf * (BM25_K1 + 1) / norm


def recency_boost(age_secs: float) -> float:
    """Multiplier in (1, 1 + RECENCY_WEIGHT]: halves its extra every half-life."""
    return float(1 + RECENCY_WEIGHT * 0.5 ** (max(age_secs, 0.0) / RECENCY_HALF_LIFE_SECS))
