"""Masking secrets in log records, whatever logger (ours or a library's) wrote them.

How a secret is masked depends on its length, so that short values are hidden without turning
every ``1`` or ``true`` of every log line into ``***``:

* ``MIN_ANYWHERE`` characters or more: wherever it appears.
* shorter, *sensitive* (its name says it is a secret: ``TOKEN``, ``--api-key``, ``Authorization``)
  and not trivial (``TRIVIAL``, or under three characters): wherever it appears as a whole token.
* any length, when it has a name: next to that name (``TOKEN=x``, ``TOKEN: x``, ``"TOKEN": "x"``,
  ``--token x``, ``Bearer x``).

Each rule applies to every spelling of the value a log line may show (``spellings``): escaped as an
error message quotes it (``b'key\\r\\n'``), stripped, and line by line.

Secrets of a known shape (API key tokens) are also masked by pattern, so a process that never saw
a key's value (a session-worker, a key created on another replica) still hides it.

A secret replaced by a newer one (a refreshed OAuth token) is *retired*: still masked until
``retired_limit`` newer ones were retired, then forgotten, so a process that refreshes tokens for
ever (an authorization server issuing tokens that live a second) does not mask ever more values.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

MASK = "***"
MIN_ANYWHERE = 6
RETIRED_LIMIT = 4096
"""Spellings of retired secrets kept masked (the oldest are forgotten past it)."""
TRIVIAL = frozenset({"true", "false", "yes", "null", "none", "nil", "off"})
_SEPARATOR = r"(?:[\"']?[ \t]*[=:][ \t]*[\"']?|[ \t]+)"
_EDGE_BEFORE, _EDGE_AFTER = r"(?<![\w-])", r"(?![\w-])"


@dataclass(frozen=True)
class Secret:
    """A string that must never reach a log line.

    ``name`` is the variable, header or flag that held it; ``sensitive`` says that name marks a
    secret (a short value of a name like ``MODE`` is masked only next to its name).
    """

    value: str
    name: str | None = None
    sensitive: bool = True


def spellings(value: str) -> set[str]:
    """``value`` and how a log line may quote it: escaped as by ``repr`` of it as text or as UTF-8
    bytes, or by JSON (an error quoting a header value with CR LF: ``b'key\\r\\n'``), stripped, and
    each of its lines."""
    forms = {value, value.strip(), repr(value)[1:-1], json.dumps(value)[1:-1], *value.splitlines()}
    with contextlib.suppress(UnicodeEncodeError):  # a lone surrogate has no UTF-8 form
        forms.add(repr(value.encode())[2:-1])
    return forms


def _is_trivial(value: str) -> bool:
    return len(value) < 3 or value.lower() in TRIVIAL


class SecretRedactor(logging.Filter):
    """A log filter that replaces every registered secret with ``***``."""

    def __init__(self, retired_limit: int = RETIRED_LIMIT) -> None:
        super().__init__()
        self.retired_limit = retired_limit
        self._retired: OrderedDict[str, str | None] = OrderedDict()  # spelling -> its secret's name
        self._anywhere: set[str] = set()
        self._tokens: set[str] = set()
        self._named: dict[str, set[str]] = {}  # lower-cased name -> values
        self._shapes: set[str] = set()  # regexes of secrets known by their form
        self._compiled: tuple[re.Pattern[str] | None, ...] | None = None

    def add(self, secrets: Iterable[Secret | str]) -> None:
        """Never let these values reach a log line (a bare string is a sensitive, unnamed secret)."""
        for secret in secrets:
            if isinstance(secret, str):
                secret = Secret(secret)
            for value in spellings(secret.value):
                self._add_spelling(value, secret)

    def __len__(self) -> int:
        """How many values (spellings) are masked, besides shapes."""
        return len(self._anywhere | self._tokens | {v for group in self._named.values() for v in group})

    def retire(self, secrets: Iterable[Secret | str]) -> None:
        """These secrets were replaced by newer ones: mask them until ``retired_limit`` spellings newer
        than theirs were retired, then forget them (unless added again meanwhile)."""
        for secret in secrets:
            if isinstance(secret, str):
                secret = Secret(secret)
            for value in spellings(secret.value):
                self._retired[value] = secret.name
                self._retired.move_to_end(value)
        while len(self._retired) > self.retired_limit:
            value, name = self._retired.popitem(last=False)
            self._anywhere.discard(value)
            self._tokens.discard(value)
            if name and (group := self._named.get(name.lower())) is not None:
                group.discard(value)
                if not group:
                    del self._named[name.lower()]
            self._compiled = None

    def _add_spelling(self, value: str, secret: Secret) -> None:
        self._retired.pop(value, None)  # in use again: masked for good
        if not value.strip():
            return
        if len(value) >= MIN_ANYWHERE:
            self._anywhere.add(value)
        elif secret.sensitive and not _is_trivial(value):
            self._tokens.add(value)
        if secret.name:
            self._named.setdefault(secret.name.lower(), set()).add(value)
        self._compiled = None

    def add_shape(self, pattern: str) -> None:
        """Never let a string matching ``pattern`` (a regex) reach a log line."""
        self._shapes.add(pattern)
        self._compiled = None

    def _patterns(self) -> tuple[re.Pattern[str] | None, ...]:
        if self._compiled is None:
            values = {v for group in self._named.values() for v in group}
            named = (
                re.compile(
                    f"{_EDGE_BEFORE}(?P<keep>(?i:{_alternation(self._named)}){_SEPARATOR})"
                    f"(?P<value>{_alternation(values)}){_EDGE_AFTER}"
                )
                if self._named
                else None
            )
            literal = [re.escape(v) for v in sorted(self._anywhere, key=len, reverse=True)]
            shapes = [f"(?:{shape})" for shape in sorted(self._shapes)]
            anywhere = re.compile("|".join(shapes + literal)) if literal or shapes else None
            tokens = (
                re.compile(f"{_EDGE_BEFORE}(?:{_alternation(self._tokens)}){_EDGE_AFTER}") if self._tokens else None
            )
            self._compiled = (named, anywhere, tokens)
        return self._compiled

    def _mask_named(self, match: re.Match[str]) -> str:
        name = match["keep"].rstrip("\"' \t=:").lower()
        if match["value"] in self._named.get(name, ()):
            return f"{match['keep']}{MASK}"
        return match[0]

    def redact(self, text: str) -> str:
        """``text`` with every registered secret replaced by ``***``."""
        named, anywhere, tokens = self._patterns()
        if named is not None:
            text = named.sub(self._mask_named, text)
        for pattern in (anywhere, tokens):
            if pattern is not None:
                text = pattern.sub(MASK, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._anywhere or self._tokens or self._named or self._shapes:
            message = record.getMessage()
            redacted = self.redact(message)
            if redacted != message:
                record.msg, record.args = redacted, None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


def _alternation(values: Iterable[str]) -> str:
    """A regex matching any of ``values``, longest first."""
    return "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))


def process_redactor() -> SecretRedactor:
    """The redactor of this process's logs, the one every role adds its secrets to.

    Logging is process-wide, so the secrets its lines must not show are too: the redactor is kept
    where logging keeps process-wide state, among the root logger's filters (where it also masks
    the root logger's own records), installed there on the first call. ``configure_logging`` puts
    the same one on the handler that every logger's records reach. Two threads installing at once
    both get the first one installed.
    """
    root = logging.getLogger()
    if not _installed(root):
        root.addFilter(SecretRedactor())
    return _installed(root)[0]


def _installed(logger: logging.Logger) -> list[SecretRedactor]:
    return [f for f in logger.filters if isinstance(f, SecretRedactor)]
