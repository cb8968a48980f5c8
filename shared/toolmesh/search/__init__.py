"""Tool search: BM25 and dense retrieval fused by reciprocal rank, flat or skills-first."""
