"""The ``toolmesh`` command: runs roles (one or all in one process) and talks to the API."""
