"""The log redactor: long secrets anywhere, short ones as whole tokens or next to their name."""

from __future__ import annotations

import io
import logging

from toolmesh.redaction import Secret, SecretRedactor


def _redactor(*secrets: Secret | str) -> SecretRedactor:
    redactor = SecretRedactor()
    redactor.add(list(secrets))
    return redactor


def test_long_secrets_are_masked_anywhere() -> None:
    assert _redactor("hunter22").redact("x=hunter22;yhunter22z") == "x=***;y***z"


def test_short_sensitive_secrets_are_masked_as_whole_tokens_only() -> None:
    redactor = _redactor(Secret("k3y", "API_KEY"))
    assert redactor.redact("using k3y now") == "using *** now"
    assert redactor.redact("k3yboard and monk3y stay") == "k3yboard and monk3y stay"


def test_trivial_values_are_masked_only_next_to_their_name() -> None:
    redactor = _redactor(Secret("1", "DEBUG_TOKEN"), Secret("true", "SECRET_FLAG"))
    assert redactor.redact("attempt 1 of 3, ok=true") == "attempt 1 of 3, ok=true"
    assert redactor.redact("DEBUG_TOKEN=1 and SECRET_FLAG: true") == "DEBUG_TOKEN=*** and SECRET_FLAG: ***"


def test_short_values_of_ordinary_names_are_masked_only_in_context() -> None:
    redactor = _redactor(Secret("dev", "MODE", sensitive=False))
    assert redactor.redact('dev mode; MODE=dev; {"MODE": "dev"}') == 'dev mode; MODE=***; {"MODE": "***"}'


def test_flags_and_bearer_tokens_are_context() -> None:
    redactor = _redactor(Secret("ab", "--api-key"), Secret("xy", "Bearer"))
    assert redactor.redact("node s.js --api-key ab --x; Authorization: Bearer xy") == (
        "node s.js --api-key *** --x; Authorization: Bearer ***"
    )
    assert redactor.redact("--api-key abc") == "--api-key abc"  # another value


def test_redactor_masks_short_secrets_in_records_of_any_logger() -> None:
    redactor = _redactor(Secret("pw9", "--password"))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redactor)
    logger = logging.getLogger("some.other.library")
    logger.addHandler(handler)
    try:
        logger.warning("spawned %s", "srv --password pw9")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "spawned srv --password ***\n"


def test_a_value_is_masked_as_an_error_quotes_it_escaped() -> None:
    """h11 refuses a header value with CR LF quoting ``repr`` of its bytes; the log shows no part of it."""
    redactor = _redactor(Secret("plainLiteralSecret77\r\n", "X-Api-Key"), Secret("Bearer crlfSECRET42\r\nX-Inj: 1"))
    lines = [
        "LocalProtocolError: Illegal header value b'plainLiteralSecret77\\r\\n'",
        "LocalProtocolError: Illegal header value b'Bearer crlfSECRET42\\r\\nX-Inj: 1'",
        'headers: {"X-Api-Key": "plainLiteralSecret77\\r\\n"}',
        "stripped plainLiteralSecret77, a line: Bearer crlfSECRET42",
    ]
    assert [redactor.redact(line) for line in lines] == [
        "LocalProtocolError: Illegal header value b'***'",
        "LocalProtocolError: Illegal header value b'***'",
        'headers: {"X-Api-Key": "***"}',
        "stripped ***, a line: ***",
    ]


def test_a_value_with_characters_beyond_ascii_is_masked_in_its_escaped_forms() -> None:
    redactor = _redactor("s\u00e9cret-\u2603-42")
    assert (
        redactor.redact("b's\\xc3\\xa9cret-\\xe2\\x98\\x83-42' or \"s\\u00e9cret-\\u2603-42\"") == "b'***' or \"***\""
    )


def test_retired_secrets_stay_masked_a_while_then_are_forgotten() -> None:
    redactor = SecretRedactor(retired_limit=8)
    redactor.add(["client-secret-kept"])
    for n in range(100):  # an access token refreshed every second, for ever
        token = f"access-token-{n:04d}"
        redactor.add([Secret(token, "Authorization")])
        if n:
            redactor.retire([Secret(f"access-token-{n - 1:04d}", "Authorization")])
    assert len(redactor) <= 8 + 4  # the retired ones kept, the live token and the kept secret
    assert redactor.redact("access-token-0099 access-token-0098 client-secret-kept") == "*** *** ***"
    assert redactor.redact("access-token-0001") == "access-token-0001"


def test_a_retired_secret_added_again_is_masked_for_good() -> None:
    redactor = SecretRedactor(retired_limit=2)
    redactor.add(["shared-client-secret"])
    redactor.retire(["shared-client-secret"])
    redactor.add(["shared-client-secret"])
    redactor.retire([f"other-secret-{n}" for n in range(10)])
    assert redactor.redact("shared-client-secret") == "***"
