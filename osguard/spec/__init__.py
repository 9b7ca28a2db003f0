"""osguard.spec."""
