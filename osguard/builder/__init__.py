"""osguard.builder."""
