"""pt2rt exporter version (Producer.exporter_version)."""
__version__ = "0.1.0"
