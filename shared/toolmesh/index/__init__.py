"""The vector index of tools and skills: the interface search and the indexer share, and the open
indexes a process shares (the backends live with the indexer: ``toolmesh_projector.vector_index``)."""
