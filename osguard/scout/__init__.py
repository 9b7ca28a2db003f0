"""osguard.scout."""
