"""osguard.providers."""
