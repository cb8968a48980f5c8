"""Loading the skill taxonomy: the packaged default, then an operator's file on top."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from toolmesh.errors import ToolmeshError

SKILL_ID_PATTERN = r"^[a-z][a-z0-9_]*$"


class Skill(BaseModel):
    """One skill tools can be classified into."""

    id: str = Field(pattern=SKILL_ID_PATTERN, max_length=64)
    name: str
    description: str = Field(min_length=1)


class TaxonomyFile(BaseModel):
    """The YAML format: ``skills: [{id, name, description}, ...]``."""

    skills: list[Skill]


class TaxonomyError(ToolmeshError):
    error_code = "CONFIGURATION_ERROR"
    status = 500


def parse_taxonomy(data: Any, source: str) -> list[Skill]:
    """Validate one taxonomy document; ``TaxonomyError`` names the source and the problem."""
    try:
        return TaxonomyFile.model_validate(data).skills
    except ValidationError as exc:
        raise TaxonomyError(f"invalid skills file {source}: {exc}") from exc


def default_taxonomy() -> list[Skill]:
    """The skills shipped with toolmesh."""
    text = resources.files("toolmesh.skills").joinpath("default_skills.yaml").read_text(encoding="utf-8")
    return parse_taxonomy(yaml.safe_load(text), "default_skills.yaml")


def load_taxonomy(extra: Path | None = None) -> list[Skill]:
    """The default skills, with ``extra`` (``TOOLMESH_SKILLS_FILE``) replacing same ids and adding new ones."""
    skills = {skill.id: skill for skill in default_taxonomy()}
    if extra is not None:
        try:
            data = yaml.safe_load(extra.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise TaxonomyError(f"cannot read skills file {extra}: {exc}") from exc
        for skill in parse_taxonomy(data, str(extra)):
            skills[skill.id] = skill
    return list(skills.values())


def skill_text(skill: Skill) -> str:
    """The text a skill is embedded by (classification and skill-first search use the same)."""
    return f"{skill.name}. {skill.description}"
