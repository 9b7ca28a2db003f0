"""osguard.testing."""
