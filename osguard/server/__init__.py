"""osguard.server."""
