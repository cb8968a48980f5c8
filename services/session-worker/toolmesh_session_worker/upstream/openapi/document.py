"""Reading an OpenAPI server's document and the URL its requests go to (``base_url``, else the
document's first server, relative to where the document was read).

An answer is read up to a bound (``read_bounded``): past it the read stops with ``TooLarge``, so a
huge document or answer never sits in memory whole.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2
import yaml

from toolmesh.contracts.openapi_config import document_problem, first_server_url
from toolmesh.egress.policy import url_problem


class TooLarge(Exception):
    """An answer longer than the bound it is read under."""


class DocumentProblem(ValueError):
    """A document toolmesh cannot use, in toolmesh's own words."""


async def read_bounded(response: httpx2.Response, limit: int) -> bytes:
    """The (decoded) body of a streamed ``response``, or ``TooLarge`` once it passes ``limit`` bytes."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > limit:
            raise TooLarge(f"the answer is longer than {limit} bytes")
    return bytes(body)


class _JsonYaml(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML read as JSON could say it: a timestamp stays a string; binary, sets and other types
    JSON has not are refused (``yaml.constructor.ConstructorError``)."""


def _no_json_type(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(None, None, f"{node.tag} has no JSON counterpart", node.start_mark)


_JsonYaml.add_constructor("tag:yaml.org,2002:timestamp", _JsonYaml.construct_yaml_str)
for _tag in ("binary", "set", "omap", "pairs"):
    _JsonYaml.add_constructor(f"tag:yaml.org,2002:{_tag}", _no_json_type)


def parse_document(raw: bytes) -> dict[str, Any]:
    """An OpenAPI 3.0/3.1 document from JSON or YAML bytes; ``DocumentProblem`` saying why not
    (also for a document nested too deeply, or with a number too long to convert)."""
    try:
        document = json.loads(raw)
    except RecursionError as exc:
        raise DocumentProblem("the document is nested too deeply") from exc
    except ValueError:
        try:
            document = yaml.load(raw, Loader=_JsonYaml)
        except RecursionError as exc:
            raise DocumentProblem("the document is nested too deeply") from exc
        except (yaml.YAMLError, ValueError) as exc:
            raise DocumentProblem(f"the document is neither JSON nor YAML ({_first_line(exc)})") from exc
    if problem := document_problem(document):
        raise DocumentProblem(problem)
    return document


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def api_base(document: dict[str, Any], base_url: str | None, spec_url: str | None, *, credentialed: bool) -> str:
    """Where the API's requests go: ``base_url``, else the document's first server (relative to
    ``spec_url``); ``DocumentProblem`` when there is none, the egress policy refuses it for everyone,
    or (``credentialed``: the config has credentials or headers) a document read from ``spec_url``
    names a server on another origin, where the document's author, not the config, would send them."""
    url = base_url or first_server_url(document) or "/"
    if spec_url is not None:
        try:
            url = urljoin(spec_url, url)
        except ValueError as exc:
            raise DocumentProblem(f"the API's URL {url!r} is not a valid URL: {exc}") from exc
    if not url.lower().startswith(("http://", "https://")):
        raise DocumentProblem("the document names no absolute server URL and none was configured (give 'base_url')")
    if problem := url_problem(url):
        raise DocumentProblem(f"the API's URL {url!r} is refused by the egress policy: {problem}")
    if "?" in url or "#" in url:
        raise DocumentProblem("the API's URL may not have a query or fragment")
    if credentialed and base_url is None and spec_url is not None and _origin(url) != _origin(spec_url):
        raise DocumentProblem(
            f"the document's server {url!r} is on another origin than 'spec_url', and the config's credentials "
            "and headers go only where the config names: give 'base_url' to send them there"
        )
    return url.rstrip("/")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or ""), parts.port or {"http": 80, "https": 443}.get(scheme)
