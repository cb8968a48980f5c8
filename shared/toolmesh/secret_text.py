"""Secrets written inside strings: command-line arguments, ``NAME=value`` pairs, header lines, URLs.

Two uses share one reading of a string: masking it for display (``mask_args``, ``mask_url``) and
listing the values the log redactor must hide (``args_secrets``, ``url_secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from toolmesh.redaction import Secret

MASK = "***"
SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "key",
        "pass",
        "passphrase",
        "passwd",
        "password",
        "pat",
        "pwd",
        "secret",
        "token",
    }
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_.-]*$")
# Inside one string: --flag=value, NAME=value, "Name: value" (to the end), "name": "value",
# "Bearer value", "--flag value", a URL.
_FLAG_VALUE = re.compile(r"(?P<name>(?<![\w-])--?[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>=)(?P<value>[^\s\"']+)")
_ASSIGNMENT = re.compile(r"(?P<name>(?<![\w.-])[A-Za-z_][A-Za-z0-9_]*)(?P<sep>=)(?P<value>[^\s\"']+)")
_HEADER = re.compile(r"(?P<name>(?<![\w-])[A-Za-z][A-Za-z0-9-]*)(?P<sep>:[ \t]*)(?P<value>\S.*)")
_JSON_FIELD = re.compile(r"(?P<name>(?<=\")[A-Za-z_][\w-]*)(?P<sep>\"\s*:\s*\")(?P<value>[^\"]+)")
_BEARER = re.compile(r"(?P<name>(?<![\w-])(?i:bearer|basic))(?P<sep>[ \t]+)(?P<value>[A-Za-z0-9._~+/=:-]+)")
_URL = re.compile(r"(?<![\w.+-])[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
# Tokens recognisable by their form alone, wherever they stand: OpenAI/Anthropic-style ``sk-``, GitHub
# ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, Slack ``xoxb-``/``xoxp-``, AWS access key ids,
# toolmesh keys ``tm_`` and OAuth tokens ``tmo_``/``tmr_``.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{16,}|gh[opusr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|xox[bpars]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|tm[or]?_[A-Za-z0-9_-]{16,})"
)
_SPACED_FLAG = re.compile(r"(?P<name>(?<![\w-])--?[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>[ \t]+)(?P<value>[^\s\"'-][^\s\"']*)")


def is_secret_name(name: str, *, last_word: bool = False) -> bool:
    """True when ``name`` (a variable, header or flag) says it holds a secret.

    Words are split on punctuation and camelCase (``X-API-Key``, ``githubToken``, ``DB_PASSWORD``);
    with ``last_word`` only the last one counts, so ``--api-key`` holds a secret and ``--key-file``
    a path.
    """
    words = [w.lower() for w in _WORD.findall(name)]
    if "api" in words and "key" in words:
        words.append("apikey")
    if not words:
        return False
    return words[-1] in SECRET_WORDS if last_word else any(w in SECRET_WORDS for w in words)


def mask_url(url: str) -> str:
    """``url`` with its user-info (``user:password@``, or a token written as the user) and its whole
    query replaced by ``***`` (unchanged without either)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return MASK
    if "@" not in parts.netloc and not parts.query:
        return url
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if port:
        netloc = f"{netloc}:{port}"
    if "@" in parts.netloc:
        netloc = f"{MASK}@{netloc}"
    query = MASK if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[Secret]:
    """The password (or a user name without one: a token written as the user) and the query values
    of ``url``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return [Secret(url)]
    found = [Secret(password, "password")] if password else []
    if parts.username and password is None:
        found.append(Secret(parts.username, "username"))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        found.append(Secret(value, name, sensitive=is_secret_name(name)))
    return found


def _rewrite(text: str, on_secret: Callable[[str, str], str]) -> str:
    """Apply ``on_secret(name, value) -> replacement`` to every secret written inside ``text``."""

    def pair(match: re.Match[str], *, last_word: bool) -> str:
        name, value = match["name"], match["value"]
        if is_secret_name(name.lstrip("-"), last_word=last_word):
            return f"{name}{match['sep']}{on_secret(name, value)}"
        return match[0]

    def url(match: re.Match[str]) -> str:
        masked = mask_url(match[0])
        if masked != match[0]:
            on_secret("", match[0])
        return masked

    text = _URL.sub(url, text)
    text = _TOKEN.sub(lambda m: on_secret("token", m[0]), text)
    text = _JSON_FIELD.sub(lambda m: pair(m, last_word=False), text)
    text = _HEADER.sub(lambda m: pair(m, last_word=False), text)
    text = _BEARER.sub(lambda m: f"{m['name']}{m['sep']}{on_secret(m['name'], m['value'])}", text)
    text = _FLAG_VALUE.sub(lambda m: pair(m, last_word=True), text)
    text = _ASSIGNMENT.sub(lambda m: pair(m, last_word=True), text)
    return _SPACED_FLAG.sub(lambda m: pair(m, last_word=True), text)


def _follows_secret_flag(args: Sequence[str], index: int) -> bool:
    """``args[index]`` is the value of a secret flag given as the previous argument (``--token X``)."""
    if index == 0 or args[index].startswith("-"):
        return False
    flag = args[index - 1]
    return bool(_FLAG.match(flag)) and is_secret_name(flag.lstrip("-"), last_word=True)


def mask_args(args: Sequence[str]) -> list[str]:
    """Command-line arguments safe to show: values of secret flags, secret ``NAME=value`` pairs,
    secret header lines, bearer tokens, URL credentials and well-known token forms (``sk-...``,
    ``ghp_...``, ``xoxb-...``, ``AKIA...``, ``tm_...``) become ``***``."""
    return [
        MASK if _follows_secret_flag(args, i) else _rewrite(arg, lambda _name, _value: MASK)
        for i, arg in enumerate(args)
    ]


def args_secrets(args: Sequence[str]) -> list[Secret]:
    """The secrets ``mask_args`` hides, each with the name that announced it (for the redactor)."""
    found: list[Secret] = []

    def collect(name: str, value: str) -> str:
        if not name:
            found.extend(url_secrets(value))
            return MASK
        found.append(Secret(value, name))
        scheme = _BEARER.fullmatch(value)  # "Authorization: Bearer X": X alone is a secret too
        if scheme:
            found.append(Secret(scheme["value"], scheme["name"]))
        return MASK

    for i, arg in enumerate(args):
        if _follows_secret_flag(args, i):
            found.append(Secret(arg, args[i - 1]))
        else:
            _rewrite(arg, collect)
    return found
