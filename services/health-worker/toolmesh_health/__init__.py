"""toolmesh."""
