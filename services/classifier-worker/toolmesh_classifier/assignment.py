"""From skill scores to a tool's skills: calibration, the 0.5 cut, at most three, a primary (BR-004).

Plain functions, no I/O: both classifiers end here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from toolmesh.contracts.events import SkillAssignment, ToolClassification

KEEP_AT = 0.5  # BR-004: assignments with confidence >= 0.5 are saved
MAX_SKILLS = 3
# Logistic calibration of MiniLM cosine similarity (tool text vs skill description): a similarity of
# MIDPOINT maps to 0.5. Fitted by eye on LiveMCPBench's 527 tools so that a tool's best skill
# clears 0.5 when it is a sensible one (see tests/unit/test_classifier.py).
MIDPOINT = 0.22
SCALE = 0.05
# Second and third skills must be close to the best one, not merely above the cut.
RUNNER_UP_MARGIN = 0.08


def confidence(similarity: float) -> float:
    """A cosine similarity as a confidence in [0, 1]."""
    return 1.0 / (1.0 + math.exp(-(similarity - MIDPOINT) / SCALE))


def assign(original_name: str, similarities: Mapping[str, float]) -> ToolClassification:
    """Up to three skills (confidence >= 0.5, close to the best), best first; the best is primary."""
    ranked = sorted(similarities.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        return ToolClassification(original_name=original_name)
    best = ranked[0][1]
    kept = [
        SkillAssignment(skill_id=skill, confidence=round(confidence(sim), 4))
        for skill, sim in ranked[:MAX_SKILLS]
        if confidence(sim) >= KEEP_AT and sim >= best - RUNNER_UP_MARGIN
    ]
    return from_confidences(original_name, {a.skill_id: a.confidence for a in kept})


def from_confidences(original_name: str, confidences: Mapping[str, float]) -> ToolClassification:
    """Skills from confidences already on [0, 1] (the LLM's): the cut, the cap, the primary."""
    kept = sorted(((s, c) for s, c in confidences.items() if c >= KEEP_AT), key=lambda kv: (-kv[1], kv[0]))
    skills = [SkillAssignment(skill_id=s, confidence=min(1.0, max(0.0, c))) for s, c in kept[:MAX_SKILLS]]
    return ToolClassification(
        original_name=original_name, skills=skills, primary_skill_id=skills[0].skill_id if skills else None
    )
