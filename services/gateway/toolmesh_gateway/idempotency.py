"""Idempotency keys: a command sent twice with one key is applied once, across gateway replicas.

A key is scoped to the principal that sent it. The first request claims it with an atomic
``kv.create`` in the ``toolmesh_idempotency`` bucket (TTL = the idempotency window), keeps the
claim alive while it works, and replaces it with its result. A duplicate that arrives meanwhile
watches the key and answers with that result once it is there; one that arrives later answers
with the stored result at once. The same key with another request is refused
(``IDEMPOTENCY_KEY_REUSED``). A claim whose gateway died stops being renewed and is taken over
by the next retry. Both edges use this: the NATS API and the REST write endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from toolmesh.contracts.api import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_PATTERN
from toolmesh.contracts.keys import KEY_TOKEN_PATTERN
from toolmesh.errors import BackendUnavailable, IdempotencyKeyReused, ValidationFailed
from toolmesh.platform.bus.leases import WRONG_LAST_SEQUENCE

log = logging.getLogger("toolmesh.gateway.idempotency")
_KEY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)
_TOKEN_RE = re.compile(KEY_TOKEN_PATTERN)
SHOWN_ONCE = "The token is shown once, in the first answer; this answer replays that request without it."
MASK = "***"
AUTHORIZATION_URL = "authorization_url"
STARTED_ONCE = (
    "The authorization URL (its state is the callback's capability) is shown once, in the first answer; "
    "this answer replays that request without it: POST /authorize again for a new one."
)


@dataclass(frozen=True)
class Stored:
    """A result as both edges replay it: the HTTP status, the JSON body and its media type."""

    status: int
    body: str
    media_type: str | None = "application/json"


def check_key(key: str) -> str:
    """``key`` if it is 1-255 printable ASCII characters; ``ValidationFailed`` otherwise."""
    if not _KEY_RE.match(key):
        raise ValidationFailed(
            f"{IDEMPOTENCY_HEADER} must be 1-255 printable ASCII characters without spaces",
            {"header": IDEMPOTENCY_HEADER},
        )
    return key


def fingerprint(*parts: str | bytes) -> str:
    """A digest of what a request asks for, to tell a retry from another request under the same key."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _without_tokens(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {name: _without_tokens(item) for name, item in value.items()}
        if isinstance(value.get("token"), str) and _TOKEN_RE.fullmatch(value["token"]):
            kept.update(token=None, note=SHOWN_ONCE)
        if isinstance(value.get(AUTHORIZATION_URL), str):
            kept.update({AUTHORIZATION_URL: None, "note": STARTED_ONCE})
        return kept
    if isinstance(value, list):
        return [_without_tokens(item) for item in value]
    return _TOKEN_RE.sub(MASK, value) if isinstance(value, str) else value


def kept_form(stored: Stored) -> Stored:
    """``stored`` as the store may keep it: without any API key token or OAuth ``state``. A created key's
    ``token`` and an authorization's ``authorization_url`` become null with a ``note``; a token anywhere
    else in the body becomes ``***``."""
    if not _TOKEN_RE.search(stored.body) and f'"{AUTHORIZATION_URL}"' not in stored.body:
        return stored
    try:
        body = json.dumps(_without_tokens(json.loads(stored.body)), separators=(",", ":"))
    except ValueError:
        body = _TOKEN_RE.sub(MASK, stored.body)
    return Stored(stored.status, body, stored.media_type)


def _record(fingerprint: str, *, renew_by: float | None = None, stored: Stored | None = None) -> bytes:
    value: dict[str, object] = {"fingerprint": fingerprint}
    if stored is None:
        value.update(state="pending", renew_by=renew_by)
    else:
        kept = kept_form(stored)  # never a key's token, not even for the window of a replay
        value.update(state="done", status=kept.status, body=kept.body, media_type=kept.media_type)
    return json.dumps(value, separators=(",", ":")).encode()


class _Claim:
    """Our hold on a key: the revision to write over, renewed until the work is done."""

    def __init__(self, kv: KeyValue, key: str, fingerprint: str, revision: int, claim_seconds: float) -> None:
        self.kv, self.key, self.fingerprint = kv, key, fingerprint
        self.revision = revision
        self.claim_seconds = claim_seconds

    async def renew_until_cancelled(self) -> None:
        while True:
            await asyncio.sleep(self.claim_seconds / 3)
            value = _record(self.fingerprint, renew_by=time.time() + self.claim_seconds)
            try:
                self.revision = await self.kv.update(self.key, value, last=self.revision)
            except KeyWrongLastSequenceError:
                log.warning("idempotency claim %s was taken over while its request still ran", self.key)
                return
            except Exception as exc:  # NATS briefly away: try again at the next beat
                log.warning("idempotency claim %s not renewed: %s", self.key, exc)

    async def finish(self, stored: Stored) -> None:
        try:
            await self.kv.update(self.key, _record(self.fingerprint, stored=stored), last=self.revision)
        except Exception as exc:  # e.g. a result larger than a message: the next retry runs again
            log.warning("idempotency result not kept (%s); releasing the key", exc)
            await self.release()

    async def release(self) -> None:
        try:
            await self.kv.delete(self.key, last=self.revision)
        except (KeyWrongLastSequenceError, NotFoundError, KeyNotFoundError):
            pass  # taken over or expired: nothing of ours left
        except BadRequestError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise


class IdempotencyStore:
    """Runs work once per (scope, key) within the bucket's window."""

    def __init__(self, kv: KeyValue, claim_seconds: float) -> None:
        self._kv = kv
        self._claim_seconds = claim_seconds

    async def run(
        self,
        scope: str,
        key: str,
        request_fingerprint: str,
        work: Callable[[], Awaitable[Stored]],
        keep: Callable[[Stored], bool] = lambda _: True,
    ) -> tuple[Stored, bool]:
        """The result of ``work`` run once for this key, and whether it is a replay of an earlier run.

        A result ``keep`` refuses (e.g. a validation error) is returned but not stored.
        """
        kv_key = fingerprint(scope, check_key(key))
        while True:
            try:
                claim = await self._claim(kv_key, request_fingerprint)
            except (NatsError, TimeoutError) as exc:
                raise BackendUnavailable(f"Idempotency keys unavailable (JetStream KV): {exc}") from exc
            if isinstance(claim, Stored):
                return claim, True
            if claim is not None:
                return await self._execute(claim, work, keep), False

    async def _claim(self, kv_key: str, request_fingerprint: str) -> _Claim | Stored | None:
        """Our new claim; the stored result of an earlier run; or None to try again."""
        pending = _record(request_fingerprint, renew_by=time.time() + self._claim_seconds)
        try:
            revision = await self._kv.create(kv_key, pending)
            return _Claim(self._kv, kv_key, request_fingerprint, revision, self._claim_seconds)
        except KeyWrongLastSequenceError:
            pass  # held or done: see below
        settled = await self._settled(kv_key, request_fingerprint)
        if not isinstance(settled, int):
            return settled
        try:  # the holder stopped renewing its claim: take it over
            revision = await self._kv.update(kv_key, pending, last=settled)
        except KeyWrongLastSequenceError:
            return None
        log.info("took over an abandoned idempotency claim %s", kv_key)
        return _Claim(self._kv, kv_key, request_fingerprint, revision, self._claim_seconds)

    async def _settled(self, kv_key: str, request_fingerprint: str) -> Stored | int | None:
        """Watch the key until it holds a result (returned), its claim lapses (its revision is
        returned) or it goes away (None)."""
        watcher = await self._kv.watch(kv_key)
        try:
            renew_by = time.time() + self._claim_seconds
            revision: int | None = None
            while True:
                try:
                    entry = await watcher.updates(timeout=max(renew_by - time.time(), 0.001))
                except NatsTimeout:
                    return revision
                if entry is None:
                    continue  # the end of the initial values
                if entry.operation in (KV_DEL, KV_PURGE) or entry.value is None:
                    return None
                value = json.loads(entry.value)
                if value["fingerprint"] != request_fingerprint:
                    raise IdempotencyKeyReused(
                        f"This {IDEMPOTENCY_HEADER} was already used for another request",
                        {"header": IDEMPOTENCY_HEADER},
                    )
                if value["state"] == "done":
                    return Stored(value["status"], value["body"], value.get("media_type"))
                revision, renew_by = entry.revision, float(value["renew_by"])
        finally:
            with contextlib.suppress(Exception):
                await watcher.stop()

    async def _execute(
        self, claim: _Claim, work: Callable[[], Awaitable[Stored]], keep: Callable[[Stored], bool]
    ) -> Stored:
        renewing = asyncio.ensure_future(claim.renew_until_cancelled())
        try:
            stored = await work()
        except BaseException:
            await _stop(renewing)
            with contextlib.suppress(Exception):
                await asyncio.shield(claim.release())
            raise
        await _stop(renewing)
        if keep(stored):
            await claim.finish(stored)
        else:
            await claim.release()
        return stored


async def _stop(task: asyncio.Future[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
