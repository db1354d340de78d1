"""agentsession: replay scripted agent sessions against an actor substrate and measure them."""

__version__ = "0.1.0"
