"""osguard.report."""
