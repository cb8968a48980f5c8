"""The indexer's vector index backends: a Qdrant server or the embedded shard (``toolmesh.index.base``
is the interface search and the indexer share), and opening the configured one (``factory``)."""
