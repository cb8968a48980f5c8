"""The official MCP conformance suite's client auth scenarios, with ``toolmesh probe --headless`` as the client.

The 2026 suite (``kit.CLIENT_SUITE_PACKAGE``) starts, per scenario, a mock MCP server and
authorization server on loopback ports, runs the probe with the server's URL appended and
``MCP_CONFORMANCE_SCENARIO`` set, and checks every request the probe made (discovery, registration,
PKCE, ``resource``, scopes, token endpoint auth, ``iss``, which errors make it stop). Every scenario
must pass under both protocol eras: the tier-1 ones of ``--suite auth`` for 2025-11-25 and
2026-07-28, the 2025-03-26 back-compat ones and the 2026-07-28 drafts; of the extensions, those in
``EXTENSIONS_PASSING``. The probe presents the suite's Client ID Metadata Document URL as its
client identity, as the reference client does.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.conformance.kit import Kit, prepare
from toolmesh.platform import processes

pytestmark = pytest.mark.conformance
SUITE_SECONDS = 300
TOOLMESH = shutil.which("toolmesh", path=str(Path(sys.executable).parent)) or "toolmesh"
CIMD_URL = "https://conformance-test.local/client-metadata.json"
PROBE = f"{TOOLMESH} probe --headless --client-metadata-url {CIMD_URL}"
TIER_1 = frozenset(
    {
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/pre-registration",
    }
)
BACK_COMPAT = frozenset({"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback"})
DRAFTS_2026 = frozenset(
    {
        "auth/resource-mismatch",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
    }
)
EXTENSIONS_PASSING = frozenset(
    {
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
        "auth/enterprise-managed-authorization",
        "auth/wif-jwt-bearer",
    }
)
"""The extension scenarios the probe passes (a stretch goal): the client credentials grant (a secret,
``private_key_jwt``), enterprise-managed authorization (SEP-990) and workload identity (the
jwt-bearer grant). Not yet: DPoP (``auth/dpop``, ``auth/dpop-nonce``)."""
RUNS = {
    "tier-1 2025-11-25": (("--suite", "auth", "--spec-version", "2025-11-25"), TIER_1),
    "tier-1 2026-07-28": (("--suite", "auth", "--spec-version", "2026-07-28"), TIER_1),
    "back-compat": (("--suite", "backcompat"), BACK_COMPAT),
    "drafts 2026-07-28": (("--suite", "draft", "--spec-version", "2026-07-28"), DRAFTS_2026),
}
"""Each run: the suite's options and the auth scenarios it must report, all passed."""
_SUMMARY = re.compile(r"^([✓✗]) (auth/\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$", re.MULTILINE)


def auth_results(output: str) -> dict[str, bool]:
    """``{auth scenario: passed}`` from the suite's summary (a warning fails, as the suite counts it)."""
    return {m.group(2): m.group(1) == "✓" and m.group(4) == "0" and not m.group(5) for m in _SUMMARY.finditer(output)}


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


async def run_client_suite(kit: Kit, options: tuple[str, ...]) -> tuple[dict[str, bool], str]:
    process = await processes.spawn_piped(
        kit.client_argv(PROBE, *options), env={**os.environ, "NO_COLOR": "1"}, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = output.decode(errors="replace")
    return auth_results(text), text


@pytest.mark.parametrize("run", sorted(RUNS))
async def test_every_client_auth_scenario_passes_with_toolmesh_probe(kit: Kit, run: str) -> None:
    options, expected = RUNS[run]
    results, output = await run_client_suite(kit, options)
    assert set(results) == expected, output[-3000:]
    failed = sorted(name for name, passed in results.items() if not passed)
    assert failed == [], f"failed: {', '.join(failed)}\n{output[-6000:]}"


async def test_the_extension_scenarios_but_dpop_pass_with_toolmesh_probe(kit: Kit) -> None:
    results, output = await run_client_suite(kit, ("--suite", "extensions"))
    assert EXTENSIONS_PASSING <= set(results), output[-3000:]
    failed = sorted(name for name in EXTENSIONS_PASSING if not results[name])
    assert failed == [], f"failed: {', '.join(failed)}\n{output[-6000:]}"
