"""The bubblewrap sandbox of STDIO children: the runner, its command line, the host paths it binds, its homes."""
