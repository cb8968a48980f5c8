"""The labelled poisoning corpus of ``tests/data/poisoning`` as ``Sample``s.

Benign: every tool of LiveMCPBench's catalog (real servers, with their sibling tools), the tools,
prompts and resource templates of ``@modelcontextprotocol/server-everything``, and hand-written
look-alikes. Attacks: hand-written, stored compactly (a ``text`` placed ``where`` in a definition
around a harmless ``base``) and expanded here. Each sample is in the ``dev`` split (tuned on) or the
``holdout`` split (written before the scanner, never tuned on).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DATA = Path(__file__).resolve().parent.parent / "data" / "poisoning"
Item = Literal["tool", "prompt", "template", "instructions"]
PROSE = ("description", "title", "prompt_description", "template_description")
"""Where an attack's text is prose that a server's instructions could carry as well."""


@dataclass(frozen=True)
class Sample:
    """One labelled definition: its id, split, whether it is an attack, the attack kind (``benign``
    for benign ones), what it is, its wire form, and its server's other tool names."""

    id: str
    split: str
    attack: bool
    kind: str
    item: Item
    definition: dict[str, Any]
    siblings: tuple[str, ...] = ()


def _split(sample_id: str) -> str:
    return "dev" if hashlib.sha256(sample_id.encode()).digest()[0] % 2 == 0 else "holdout"


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def placed(where: str, text: str, base: str) -> tuple[Item, dict[str, Any]]:
    """A definition with ``text`` placed ``where`` (description, title, a property's name, description,
    enum value or default, a nested property, a prompt's description or argument, a template's
    description or URI template) and ``base`` as its harmless description."""
    base = base or "A helper tool."
    prop: dict[str, Any] = {"type": "string", "description": "Input value."}
    tool: dict[str, Any] = {"name": "helper", "description": base}
    if where == "description":
        tool["description"] = f"{base} {text}".strip()
    elif where == "title":
        tool["title"] = text
    elif where == "property_description":
        prop["description"] = text
    elif where == "property_name":
        tool["inputSchema"] = {"type": "object", "properties": {"value": {"type": "string"}, text: {"type": "string"}}}
    elif where == "nested_property_description":
        prop = {"type": "object", "properties": {"extra": {"type": "string", "description": text}}}
    elif where == "enum":
        prop = {"type": "string", "description": base, "enum": ["default", text]}
    elif where == "default":
        prop = {"type": "string", "description": base, "default": text}
    elif where in ("prompt_description", "prompt_argument"):
        prompt: dict[str, Any] = {
            "name": "assist",
            "description": text if where == "prompt_description" else "A prompt.",
        }
        prompt["arguments"] = [{"name": "input", "description": text if where == "prompt_argument" else "The input."}]
        return "prompt", prompt
    elif where in ("template_description", "template_uri"):
        template = {"name": "docs", "uriTemplate": text if where == "template_uri" else "docs://{id}"}
        template["description"] = text if where == "template_description" else base
        return "template", template
    else:
        raise ValueError(f"unknown placement {where!r}")
    tool.setdefault("inputSchema", {"type": "object", "properties": {"input": prop}})
    return "tool", tool


def _compact(name: str, split: str | None) -> list[Sample]:
    samples = []
    for row in _lines(name):
        item, definition = placed(row["where"], row["text"], row["base"])
        attack = row.get("label", "attack") == "attack"
        siblings = tuple(row["tools"])
        samples.append(Sample(row["id"], split or _split(row["id"]), attack, row["kind"], item, definition, siblings))
    return samples


def _everything() -> list[Sample]:
    data = json.loads((DATA / "everything.json").read_text(encoding="utf-8"))
    names = tuple(t["name"] for t in data["tools"]) + tuple(p["name"] for p in data["prompts"])
    samples = []
    for item, key in (("tool", "tools"), ("prompt", "prompts"), ("template", "templates")):
        for d in data[key]:
            sample_id = f"everything-{item}-{d['name']}"
            samples.append(Sample(sample_id, _split(sample_id), False, "benign", item, d, names))  # type: ignore[arg-type]
    return samples


def load_instructions() -> list[Sample]:
    """Servers' instructions (``{"instructions": text}``), scored apart from the definitions: benign, the real
    instructions of server-everything and the description of every benign LiveMCPBench tool read as a
    server's prose; attacks, every hidden-instruction, Unicode and exfiltration attack written as prose
    (shadowing needs the server's tool list, which instructions are not scanned against), in its split."""
    everything = json.loads((DATA / "everything.json").read_text(encoding="utf-8"))["instructions"]
    samples = [
        Sample(
            "everything-instructions",
            _split("everything-instructions"),
            False,
            "benign",
            "instructions",
            {"instructions": everything},
        )
    ]
    for r in _lines("benign_livemcpbench.jsonl"):
        if r["tool"].get("description"):
            sample_id = f"instructions-{r['id']}"
            text = {"instructions": r["tool"]["description"]}
            samples.append(Sample(sample_id, _split(sample_id), False, "benign", "instructions", text))
    for name, split in (("attacks_dev.jsonl", "dev"), ("attacks_holdout.jsonl", "holdout")):
        for row in _lines(name):
            if row["where"] in PROSE and row["kind"] != "shadowing" and row.get("label", "attack") == "attack":
                text = {"instructions": f"{row['base']} {row['text']}".strip()}
                samples.append(Sample(f"instructions-{row['id']}", split, True, row["kind"], "instructions", text))
    return samples


def load_corpus() -> list[Sample]:
    """Every sample of the corpus."""
    benign = [
        Sample(r["id"], _split(r["id"]), False, "benign", "tool", r["tool"], tuple(r["siblings"]))
        for r in _lines("benign_livemcpbench.jsonl")
    ]
    return [
        *benign,
        *_everything(),
        *_compact("benign_handwritten.jsonl", None),
        *_compact("attacks_dev.jsonl", "dev"),
        *_compact("attacks_holdout.jsonl", "holdout"),
    ]
