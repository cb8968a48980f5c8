"""``toolmesh asyncapi``: the AsyncAPI document of the NATS API and the events (``docs/asyncapi.json``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from toolmesh_gateway.nats_api.document import render_document


def write_document(args: argparse.Namespace) -> int:
    """Print the document, or write it to ``--output``."""
    text = render_document()
    if args.output is None:
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def add_parser(sub: Any) -> None:
    """Add ``asyncapi`` to the top-level subcommands."""
    command = sub.add_parser("asyncapi", help="print the AsyncAPI 3.0 document of the NATS API and the events")
    command.add_argument("--output", "-o", type=Path, help="write it to this file instead of stdout")
    command.set_defaults(offline=write_document)
