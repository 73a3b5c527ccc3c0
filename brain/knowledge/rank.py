"""Ranking passages for a learner's question when no model reads them: the definition first.

bm25 rewards a passage that repeats the asked words, so for "what is
photosynthesis?" a paragraph that says "photosynthesis" five times in passing
beats the one that says what photosynthesis *is*.  A model would read past
that; the offline answer quotes what comes first.  So candidates from any
number of searches (the persona's notes, the partner's documents) are ranked
by what a reader looks for, strongest first:

1. the passage *defines* the asked term: a sentence starts with it and goes on
   with ``is``, ``are``, ``means``, ``refers to``, ``:`` or a dash
   ("Photosynthesis is how plants ..."), or names it at the end
   ("... is called photosynthesis");
2. its section heading is the term ("## Photosynthesis", "## What is photosynthesis?");
3. its note's or document's title is the term;

then by bm25, as a fraction of the best score of the search it came from
(scores of different indexes do not compare, their order within one does).
The asked term is the question's words without stopwords and question words
(:func:`brain.knowledge.query.query_words`), compared by a light stem so
plurals and ``'s`` match; a definition's subject must end with an asked word
("In photosynthesis, chlorophyll is ..." defines chlorophyll, not photosynthesis).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from brain.knowledge.query import query_words

DEFINES = 3.0
HEADING = 2.0
TITLE = 1.0
"""What each signal adds to a candidate's relevance (which is at most 1.0): a higher signal always wins."""
RELEVANCE_RATIO = 0.7
"""A candidate with no signal is kept only if its bm25 is at least this fraction of its search's best."""
MAX_SUBJECT_WORDS = 6
"""Longer questions are not asking for a term: bm25 alone ranks them."""
HEAD_SLACK = 2
"""Words a definition's subject may have beyond the asked ones ("a right triangle's hypotenuse" for "hypotenuse" is 2)."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_COPULA = re.compile(
    r"\s(?:is|are|was|were|means|mean|refers to|refer to|describes|describe|says|states)\s"  # "X is ..."
    r"|\s*[:—–]\s|\s-\s",  # "X: ...", "X — ...", "X - ..."
    re.I,
)
_NAMED = re.compile(r"\b(?:is|are)\s+(?:called|known as|named)\s+([^,;(]+)", re.I)
_MARKUP = re.compile(r"[*_`>#]+")


@dataclass(frozen=True)
class Candidate:
    """One passage some search found, with its relevance there (1.0 for that search's best)."""

    title: str
    heading: str
    text: str
    source: str
    relevance: float


def stem(word: str) -> str:
    """A light stem: ``photosynthesis`` stays, ``plants`` and ``plant's`` are ``plant``, ``stormed`` ``storm``."""
    word = word.casefold().removesuffix("'s").removesuffix("’s")
    for suffix in ("ies", "es", "s", "ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def stems(words: Iterable[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in words)


def _names(subject: frozenset[str], phrase: str, *, ends: bool) -> bool:
    """The phrase names the subject: every subject word is in it, at most HEAD_SLACK others, and
    (with ``ends``) its last word is a subject word, as the noun a definition is about."""
    words = [stem(w) for w in query_words(phrase)]
    found = frozenset(words)
    if not words or not subject <= found or len(found - subject) > HEAD_SLACK:
        return False
    return words[-1] in subject if ends else words[0] in subject


def _defining(sentence: str, subject: frozenset[str]) -> bool:
    sentence = _MARKUP.sub("", sentence).strip().lstrip("-+•0123456789.) ")
    copula = _COPULA.search(sentence)
    if copula and copula.start() <= 80 and _names(subject, sentence[: copula.start()], ends=True):
        return True
    named = _NAMED.search(sentence)
    return bool(named and _names(subject, named.group(1), ends=False))


def definition_at(text: str, subject: frozenset[str]) -> int | None:
    """Where in ``text`` the first sentence defining the subject starts ("X is ...", "X: ...",
    "... is called X"), or None; the offset lets a long passage be quoted from there."""
    start = 0
    for boundary in [*_SENTENCE.finditer(text), None]:
        end = boundary.start() if boundary else len(text)
        if text[start:end].strip() and _defining(text[start:end], subject):
            return start
        if boundary:
            start = boundary.end()
    return None


def defines(text: str, subject: frozenset[str]) -> bool:
    return definition_at(text, subject) is not None


def subject_of(question: str) -> frozenset[str]:
    """The asked term as stems; empty for a question too long to be asking for one."""
    asked = query_words(question)
    return stems(asked) if len(asked) <= MAX_SUBJECT_WORDS else frozenset()


def rank(candidates: Iterable[Candidate], question: str, limit: int) -> list[Candidate]:
    """The best ``limit`` candidates for the learner's ``question``, strongest signal first.

    A candidate with no signal and a bm25 under :data:`RELEVANCE_RATIO` of its
    search's best is left out, so a stray common word does not drag in an
    unrelated passage.
    """
    subject = subject_of(question)
    scored: list[tuple[float, int, Candidate]] = []
    for order, candidate in enumerate(candidates):
        signal = 0.0
        if subject:
            if defines(candidate.text, subject):
                signal += DEFINES
            if candidate.heading and stems(query_words(candidate.heading)) == subject:
                signal += HEADING
            if stems(query_words(candidate.title)) == subject:
                signal += TITLE
        if signal or candidate.relevance >= RELEVANCE_RATIO:
            scored.append((signal + candidate.relevance, order, candidate))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [candidate for _score, _order, candidate in scored[:limit]]
