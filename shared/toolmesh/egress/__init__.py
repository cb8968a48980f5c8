"""Where upstream URLs may point (the SSRF policy) and the HTTP transport that enforces it."""
