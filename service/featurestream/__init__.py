"""featurestream: streaming feature selection as a service."""

from __future__ import annotations

# The one version source: pyproject.toml reads it (dynamic version), the client reads
# it back from the installed distribution's metadata.
__version__ = "0.1.0"

__all__ = ["__version__"]
