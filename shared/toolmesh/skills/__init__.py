"""Skills: the taxonomy tools are classified into (default YAML shipped here, extendable by a file)."""
