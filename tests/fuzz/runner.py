"""A schema-driven fuzz run of a toolmesh's REST API: schemathesis against ``/openapi.json``.

Every operation gets generated requests (valid and invalid) as each principal given; the run
fails on any 5xx that is toolmesh's fault (``checks.py``). Path parameters ``server_id`` are
drawn, most of the time, from the ids of servers that exist, so the operations on one server are
fuzzed past their 404. Use it against any running toolmesh:

    python -m tests.fuzz.runner --url http://127.0.0.1:8081 --token "$(cat ~/.toolmesh/admin-token)"

(``--token`` once per principal, e.g. an owner's and a user's key; ``--server-id`` for ids to
favour.) ``tests/fuzz`` runs it against a toolmesh the test starts itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolmesh.platform import processes

CHECKS_MODULE = Path(__file__).with_name("checks.py")
"""Registers ``no_toolmesh_fault``, the only check the run enables."""


@dataclass(frozen=True)
class FuzzBudget:
    """How much to try: examples per operation, a time budget per principal, seed, phases, workers.

    One worker: schemathesis's workers are threads, and CPython 3.11 keeps the AST constructor's
    recursion counter in state all threads share; two threads in ``ast.parse`` at once (hypothesis
    parses the source of its filter lambdas) can end the run with "AST constructor recursion depth
    mismatch" (CPython gh-106905), a runtime error that is not toolmesh's.
    """

    max_examples: int = 25
    max_seconds: int = 60
    seed: int = 9
    phases: str = "examples,coverage,fuzzing"
    workers: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FuzzBudget:
        """The defaults, overridden by ``TOOLMESH_FUZZ_{EXAMPLES,SECONDS,SEED,PHASES}``."""
        default = cls()
        return cls(
            max_examples=int(environ.get("TOOLMESH_FUZZ_EXAMPLES", default.max_examples)),
            max_seconds=int(environ.get("TOOLMESH_FUZZ_SECONDS", default.max_seconds)),
            seed=int(environ.get("TOOLMESH_FUZZ_SEED", default.seed)),
            phases=environ.get("TOOLMESH_FUZZ_PHASES", default.phases),
        )


@dataclass(frozen=True)
class FuzzTarget:
    """What to fuzz: the API's base URL, and existing server ids to use as ``server_id``."""

    base_url: str
    server_ids: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class FuzzOutcome:
    """The exit code of one run and what schemathesis printed."""

    principal: str
    returncode: int
    output: str


def config_text(server_ids: Sequence[str]) -> str:
    """A ``schemathesis.toml`` enabling only ``no_toolmesh_fault`` and drawing ``server_id`` from
    ``server_ids`` four times in five."""
    text = "[checks]\nenabled = false\nno_toolmesh_fault = { enabled = true }\n"
    if server_ids:
        values = ", ".join(json.dumps(i) for i in server_ids)
        text += (
            f"\n[dictionaries.server_ids]\nvalues = [{values}]\n\n"
            '[parameters]\n"path.server_id" = { dictionary = "server_ids", probability = 0.8 }\n'
        )
    return text


def schemathesis_command(target: FuzzTarget, token: str, budget: FuzzBudget, config_file: Path) -> list[str]:
    """The ``st run`` command line for one principal."""
    executable = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    return [
        executable,
        "--config-file",
        str(config_file),
        "run",
        f"{target.base_url.rstrip('/')}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--phases",
        budget.phases,
        "--max-examples",
        str(budget.max_examples),
        "--max-time",
        str(budget.max_seconds),
        "--seed",
        str(budget.seed),
        "--workers",
        str(budget.workers),
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--no-color",
    ]


async def fuzz(target: FuzzTarget, principal: str, token: str, budget: FuzzBudget) -> FuzzOutcome:
    """Run schemathesis as ``principal`` without blocking the event loop (the API may live in it)."""
    with tempfile.TemporaryDirectory(prefix="toolmesh-fuzz-") as work:
        config_file = Path(work) / "schemathesis.toml"
        config_file.write_text(config_text(target.server_ids))
        process = await processes.spawn_piped(
            schemathesis_command(target, token, budget, config_file),
            cwd=work,
            env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": str(CHECKS_MODULE)},
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), budget.max_seconds + 180)
        except TimeoutError:
            await processes.stop(process, signal.SIGKILL, 0)
            output, _ = await process.communicate()
    returncode = process.returncode if process.returncode is not None else -1
    return FuzzOutcome(principal, returncode, output.decode(errors="replace"))


def main(argv: list[str] | None = None) -> int:
    """Fuzz a running toolmesh as each ``--token``; exit 1 when any run found a problem."""
    parser = argparse.ArgumentParser(description="Fuzz toolmesh's REST API from its OpenAPI document.")
    parser.add_argument("--url", default="http://127.0.0.1:8081")
    parser.add_argument("--token", action="append", required=True, help="a bearer token (repeat per principal)")
    parser.add_argument("--server-id", action="append", default=[], help="an existing server id to favour")
    args = parser.parse_args(argv)
    budget = FuzzBudget.from_env(os.environ)
    target = FuzzTarget(args.url, tuple(args.server_id))
    failed = False
    for index, token in enumerate(args.token):
        outcome = asyncio.run(fuzz(target, f"principal {index + 1}", token, budget))
        print(outcome.output)
        failed = failed or outcome.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
