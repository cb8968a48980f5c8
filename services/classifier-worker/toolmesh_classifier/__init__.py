"""The classifier-worker: assigns 1-3 skills to discovered tools (BR-004), in batches of 10."""
