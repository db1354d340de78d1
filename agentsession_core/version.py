"""The package's version, in a module of its own so that any layer can name it without
importing the public API in agentsession_core/__init__.py (which reaches every layer)."""

__version__ = "0.1.0"
