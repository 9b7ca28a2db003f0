"""osguard: measure whether computer-use agents stay safe while doing ordinary work.

Importing this package is cheap: subpackages import their heavy dependencies lazily.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
