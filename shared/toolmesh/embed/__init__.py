"""Local text embeddings: all-MiniLM-L6-v2 (int8 ONNX) with its tokenizer shipped as package data."""
