"""Built-in verifiers; look them up by spec with ``osguard.scout.get_verifier``."""
