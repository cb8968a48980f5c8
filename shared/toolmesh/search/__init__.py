"""Tool search: an in-memory catalog kept by the indexer; BM25F and dense signals mixed, skills as a bonus."""
