"""osguard.invariants."""
