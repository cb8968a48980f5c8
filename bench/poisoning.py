"""Precision and recall of the poisoning scanner (``toolmesh.poisoning``) on the labelled corpus of
``tests/data/poisoning`` (see ``tests/poisoning/corpus.py``).

A sample counts as flagged when the scanner reports any finding. Reported per split (``dev``: tuned
on; ``holdout``: written before the scanner and never tuned on; ``all``) and per attack kind (recall),
with the ids of false positives and missed attacks, and the scan time per definition (p50, µs); and
the same scores, apart, for servers' instructions (``load_instructions``). Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.poisoning.corpus import Sample, load_corpus, load_instructions  # noqa: E402
from toolmesh.poisoning import Finding, scan_instructions, scan_prompt, scan_template, scan_tool  # noqa: E402

SCANS = {
    "tool": scan_tool,
    "prompt": scan_prompt,
    "template": scan_template,
    "instructions": lambda item, _: scan_instructions(item["instructions"]),
}


def scanned(sample: Sample) -> tuple[list[Finding], float]:
    """The findings of one sample and how long the scan took (µs)."""
    start = time.perf_counter()
    findings = SCANS[sample.item](sample.definition, sample.siblings)
    return findings, (time.perf_counter() - start) * 1e6


def _scores(rows: list[tuple[Sample, bool]]) -> dict[str, Any]:
    tp = sum(1 for s, flagged in rows if s.attack and flagged)
    fp = sum(1 for s, flagged in rows if not s.attack and flagged)
    fn = sum(1 for s, flagged in rows if s.attack and not flagged)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for s, flagged in rows:
        if s.attack:
            by_kind[s.kind].append(flagged)
    return {
        "attacks": tp + fn,
        "benign": sum(1 for s, _ in rows if not s.attack),
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f1": round(f1, 3),
        "recall_by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())},
        "false_positives": sorted(s.id for s, flagged in rows if not s.attack and flagged),
        "missed": sorted(s.id for s, flagged in rows if s.attack and not flagged),
    }


def _split_scores(rows: list[tuple[Sample, bool]]) -> dict[str, Any]:
    return {
        split: _scores([(s, f) for s, f in rows if split == "all" or s.split == split])
        for split in ("dev", "holdout", "all")
    }


def main() -> None:
    corpus = load_corpus()
    rows, times = [], []
    for sample in corpus:
        findings, micros = scanned(sample)
        rows.append((sample, bool(findings)))
        times.append(micros)
    report = {
        "benchmark": "poisoning",
        "samples": len(corpus),
        "splits": _split_scores(rows),
        "scan_us_p50": round(statistics.median(times), 1),
        "scan_us_p95": round(sorted(times)[int(len(times) * 0.95)], 1),
        "instructions": _split_scores([(s, bool(scanned(s)[0])) for s in load_instructions()]),
    }
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
