"""osguard.evaluators."""
