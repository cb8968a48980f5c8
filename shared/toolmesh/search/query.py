"""What of a query is searched: its URLs reduced to words, and its clauses.

A URL in a task ("summarise https://www.youtube.com/watch?v=arj7oStGLkU") asks for a web page; its
raw tokens (``https``, ``www``, ``watch``, an id) are noise to BM25 and to the sentence model, so
it is searched as ``web page url youtube``. Task-like queries name several steps ("fetch the page,
summarise it and save it as markdown", "map a route with the charging stations"): each clause is
embedded too, and a tool scores by the clause it fits best (``search.ranking``).

On LiveMCPBench (bench/search_quality.py, MRR@10 tuning / held-out half / all) both took ``flat``
and the default ``hierarchical`` from .575 / .548 / .561 to .594 / .558 / .576. Each rests on one
or two tasks (the two with a URL are both in the tuning half; splitting at "with" moves one
held-out task), so they are small gains.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A URL ends before the punctuation that closes its sentence or clause (that stays a boundary).
_URL = re.compile(r"\bhttps?://\S+?(?=[.,;:!?)\]}'\"]*(?:\s|$))", re.IGNORECASE)
_CLAUSES = re.compile(r"(?<=[.!?;:])\s+|,\s*(?:and\s+|then\s+)?|\s+(?:and then|then|and|with)\s+")
# A title or "e.g." before a name or an example: its full stop ends no sentence ("find Mr. Lu's resume").
_ABBREVIATION = re.compile(r"\b(Mrs?|Ms|Dr|Prof|St|Jr|Sr|vs|e\.g|i\.e)\.(?=\s)", re.IGNORECASE)
MAX_CLAUSES = 6


def _url_words(match: re.Match[str]) -> str:
    try:
        host = urlsplit(match.group(0)).hostname or ""
    except ValueError:  # a malformed URL (e.g. a bad port) still reads as a web page
        host = ""
    if ":" in host or host.replace(".", "").isdigit():
        host = ""  # an IP address names no site
    labels = [label for label in host.split(".") if label]
    if len(labels) > 1:
        labels = labels[:-1]  # the top-level domain says nothing about the page
    words = [label for label in labels if label != "www"]
    return " ".join(["web page url", *words])


def searchable(query: str) -> str:
    """The text searched for ``query``: each URL replaced by ``web page url`` and its host's words."""
    return _URL.sub(_url_words, query)


def clauses(query: str) -> list[str]:
    """The query's clauses of two words or more (none when the query is a single clause)."""
    parts = [p.strip() for p in _CLAUSES.split(_ABBREVIATION.sub(r"\1", query)) if p and len(p.split()) >= 2]
    return parts[:MAX_CLAUSES] if len(parts) > 1 else []
