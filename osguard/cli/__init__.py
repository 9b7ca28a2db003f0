"""osguard.cli."""
