"""The skills' vectors, which classification and skill-first search compare tools with.

For the shipped taxonomy they ship too (``default_skill_vectors.npz``, written by
``python -m toolmesh.skills.vectors`` and checked against the model by a test), so a process that
starts with nothing to embed never builds the embedding model; other skills are embedded.
"""

from __future__ import annotations

import functools
import sys
from importlib import resources
from pathlib import Path

import numpy as np

from toolmesh.embed.model import MODEL_ID, Embedder, Vectors, load_embedder
from toolmesh.skills.taxonomy import Skill, default_taxonomy, skill_text

SHIPPED = "default_skill_vectors.npz"


@functools.cache
def shipped_vectors() -> dict[str, np.ndarray]:
    """Vectors of the shipped skills' texts, by text (empty when the file was made by another model)."""
    with resources.files("toolmesh.skills").joinpath(SHIPPED).open("rb") as handle:
        data = np.load(handle, allow_pickle=False)
        if str(data["model"]) != MODEL_ID:
            return {}
        return dict(zip(data["texts"].tolist(), np.asarray(data["vectors"], dtype=np.float32), strict=True))


def skill_vectors(embedder: Embedder, skills: list[Skill]) -> Vectors:
    """One unit vector per skill, in order: the shipped ones when every text is known, else embedded."""
    texts = [skill_text(s) for s in skills]
    known = shipped_vectors() if embedder.model_id == MODEL_ID else {}
    if texts and all(text in known for text in texts):
        return np.stack([known[text] for text in texts])
    return embedder.embed(texts)


def write_shipped(path: Path) -> None:
    """Embed the shipped taxonomy with the packaged model and write the vectors file."""
    embedder = load_embedder()
    if embedder is None:
        raise SystemExit("the embedding model is not available")
    texts = [skill_text(s) for s in default_taxonomy()]
    np.savez(path, model=np.array(MODEL_ID), texts=np.array(texts), vectors=embedder.embed(texts))


if __name__ == "__main__":
    write_shipped(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name(SHIPPED))
