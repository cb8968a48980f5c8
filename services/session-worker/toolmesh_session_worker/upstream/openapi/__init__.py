"""HTTP APIs an OpenAPI 3.0/3.1 document describes, as upstreams whose tools are its operations.

``schemas`` inlines references (no I/O), ``operations`` turns operations into tools, ``requests``
builds a call's HTTP request, ``document`` reads the document, ``session`` is the upstream.
"""
