"""The package version, read by the package and by the model files it writes (pyproject.toml states the same)."""

__version__ = "0.1.0"
