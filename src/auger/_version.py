"""auger's version, in a module of its own: every part that states it imports it from here, beneath the
public API (`auger/__init__.py`), which imports everything else."""

__version__ = "0.1.0"
