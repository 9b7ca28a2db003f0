"""Deterministic byte generators for variant setup steps (see tasks/README.md)."""
