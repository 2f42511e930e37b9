"""auger: an AI coding-agent engine.

Kept import-free on purpose: `auger --version` must not pay for the engine.
"""

__version__ = "0.1.0"
