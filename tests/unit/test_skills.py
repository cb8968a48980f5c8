"""Taxonomy loading, classifier thresholds (BR-004), embedding normalisation, the LLM answer check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolmesh.contracts.events import DiscoveredTool
from toolmesh.embed.model import DIMENSIONS, mean_pool_normalise
from toolmesh.embed.text import tool_text
from toolmesh.search.table import SkillVectors, skill_vector
from toolmesh.skills.taxonomy import Skill, TaxonomyError, default_taxonomy, load_taxonomy
from toolmesh_classifier.assignment import KEEP_AT, assign, confidence, from_confidences
from toolmesh_classifier.llm import LlmClassifier
from toolmesh_classifier.worker import batches

pytestmark = pytest.mark.unit


def test_default_taxonomy_ships_with_the_package() -> None:
    skills = default_taxonomy()
    ids = {s.id for s in skills}
    assert 15 <= len(skills) <= 25
    assert {"code_management", "issue_tracking", "web_search", "file_system", "database", "calendar"} <= ids
    assert all(s.description for s in skills)


def test_skills_file_replaces_and_extends(tmp_path: Path) -> None:
    extra = tmp_path / "skills.yaml"
    extra.write_text(
        "skills:\n"
        "  - {id: web_search, name: Web search, description: Our own wording}\n"
        "  - {id: robotics, name: Robotics, description: Control robot arms}\n"
    )
    skills = {s.id: s for s in load_taxonomy(extra)}
    assert skills["web_search"].description == "Our own wording"
    assert "robotics" in skills and "database" in skills


@pytest.mark.parametrize("text", ["skills: [{id: Bad Id, name: x, description: y}]", "skills: 3", ": :"])
def test_invalid_skills_file_is_a_named_error(tmp_path: Path, text: str) -> None:
    extra = tmp_path / "bad.yaml"
    extra.write_text(text)
    with pytest.raises(TaxonomyError, match=r"bad\.yaml"):
        load_taxonomy(extra)


def test_br004_confidence_is_calibrated_and_monotonic() -> None:
    assert confidence(0.22) == pytest.approx(0.5)
    assert confidence(0.4) > 0.95 and confidence(0.05) < 0.05
    assert confidence(0.3) > confidence(0.25)


def test_br004_keeps_one_to_three_skills_above_half_with_the_best_primary() -> None:
    result = assign("create_issue", {"issue_tracking": 0.45, "code_management": 0.42, "web_search": 0.1, "x": 0.41})
    assert [s.skill_id for s in result.skills] == ["issue_tracking", "code_management", "x"]
    assert result.primary_skill_id == "issue_tracking"
    assert all(s.confidence >= KEEP_AT for s in result.skills)


def test_br004_runner_up_far_below_the_best_is_dropped() -> None:
    result = assign("t", {"a": 0.6, "b": 0.45})
    assert [s.skill_id for s in result.skills] == ["a"]


def test_br004_nothing_above_half_means_no_skill() -> None:
    result = assign("t", {"a": 0.1, "b": 0.05})
    assert result.skills == [] and result.primary_skill_id is None
    assert from_confidences("t", {"a": 0.49}).skills == []
    capped = from_confidences("t", {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6})
    assert [s.skill_id for s in capped.skills] == ["a", "b", "c"]


def test_ec006_classification_batches_of_ten() -> None:
    tools = [DiscoveredTool(original_name=f"t{i}") for i in range(25)]
    assert [len(b) for b in batches(tools)] == [10, 10, 5]


def test_mean_pooling_ignores_padding_and_normalises() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    pooled = mean_pool_normalise(hidden, mask)
    assert pooled.tolist() == [[1.0, 0.0]]


def test_real_embedder_gives_unit_vectors_and_sensible_similarity() -> None:
    from toolmesh.embed.model import load_embedder

    embedder = load_embedder()
    if embedder is None:
        pytest.skip("embedding model not installed")
    vectors = embedder.embed(["A man is eating food.", "A man is eating a piece of bread.", "The girl has a baby."])
    assert vectors.shape == (3, DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.6 > vectors[0] @ vectors[2]
    # Batching and ordering by length give the same vectors as one at a time.
    assert np.allclose(embedder.embed(["The girl has a baby."])[0], vectors[2], atol=1e-5)


def test_br008_skill_vector_is_normalised_mean_or_description_alone() -> None:
    description = np.array([1.0, 0.0], dtype=np.float32)
    assert skill_vector(description, np.zeros(2), 0).tolist() == [1.0, 0.0]
    mixed = skill_vector(description, np.array([0.0, 1.0]), 1)
    assert mixed.tolist() == pytest.approx([2**-0.5, 2**-0.5])


def test_br008_skill_sums_follow_tools_in_and_out() -> None:
    skills = SkillVectors({"a": Skill(id="a", name="A", description="a")}, 2)
    skills.descriptions["a"] = np.array([1.0, 0.0], dtype=np.float32)
    tool = np.array([0.0, 1.0], dtype=np.float32)
    skills.add(["a", "unknown"], tool, 1)
    assert skills.count("a") == 1 and skills.changed == {"a"}
    assert skills.vector("a").tolist() == pytest.approx([2**-0.5, 2**-0.5])
    skills.add(["a"], tool, -1)
    assert skills.count("a") == 0 and skills.vector("a").tolist() == pytest.approx([1.0, 0.0])


def test_tool_text_has_name_description_and_parameter_names() -> None:
    text = tool_text("github", "createIssue", "Open an issue.", {"properties": {"repo_name": {}, "title": {}}})
    assert text == "github create issue. Open an issue. parameters: repo name title"


def test_llm_answer_is_validated_and_unknown_skills_dropped() -> None:
    llm = LlmClassifier(None, "m", default_taxonomy())
    tools = [DiscoveredTool(original_name="create_issue"), DiscoveredTool(original_name="search")]
    answer = {
        "tools": [
            {"name": "create_issue", "skills": [{"skill_id": "issue_tracking", "confidence": 0.9}]},
            {"name": "search", "skills": [{"skill_id": "made_up", "confidence": 0.9}]},
        ]
    }
    parsed = llm.parse(tools, json.dumps(answer))
    assert parsed[0].primary_skill_id == "issue_tracking" and parsed[1].skills == []
    with pytest.raises(ValueError):
        llm.parse(tools, json.dumps({"tools": answer["tools"][:1]}))
    with pytest.raises(ValueError):
        llm.parse(tools, "not json")
