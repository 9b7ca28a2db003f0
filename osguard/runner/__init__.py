"""osguard.runner."""
