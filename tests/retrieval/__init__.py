"""Retrieval quality of the product's search: the catalog fed through the index projection, the
scores of ranked results, and the frozen set of the CI quality gate (shared by ``bench/``)."""
