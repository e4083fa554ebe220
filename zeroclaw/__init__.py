"""zeroclaw: a self-hosted multi-agent assistant daemon."""

from ._version import __version__

__all__ = ["__version__"]
