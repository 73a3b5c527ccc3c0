"""The learner's words as a search: stopwords out, and never FTS5 syntax.

Both FTS5 indexes -- the persona's notes (:mod:`brain.notes`) and the ``fts``
knowledge engine (:mod:`brain.knowledge.fts`) -- search with the same words,
and the offline ranking (:mod:`brain.knowledge.rank`) compares them, so they
live here, beside neither.
"""

from __future__ import annotations

import re

MAX_QUERY_WORDS = 24

_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers him his how i
if in into is it its just me more most my no nor not now of off on once only or other our out over own same she should
so some such than that the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours
explain tell show give help please thanks thank know want need understand mean means meaning question questions
define definition describe
hi hello hey ok okay yes yeah
el la los las un una unos unas de del y o que en es por para con se su qué cómo cuál como
le les des du et ou est pour avec une dans ce qui quoi comment
""".split())
_WORD = re.compile(r"[^\W_]+")


def query_words(text: str) -> list[str]:
    """The words worth searching for: letters and digits only, casefolded, no stopwords, each once."""
    words: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if word not in _STOPWORDS and (len(word) > 1 or word.isdigit()) and word not in words:
            words.append(word)
            if len(words) == MAX_QUERY_WORDS:
                break
    return words


def fts_query(text: str) -> str | None:
    """The learner's words as an FTS5 query of quoted terms joined by OR; None when no word is left.

    Only letters and digits survive, each term inside double quotes, so no
    input can form FTS5 syntax (operators, column filters, prefixes, groups).
    """
    return " OR ".join(f'"{word}"' for word in query_words(text)) or None


