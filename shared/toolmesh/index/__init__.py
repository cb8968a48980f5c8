"""The vector index of tools and skills: one small interface, a Qdrant-server and an embedded backend."""
