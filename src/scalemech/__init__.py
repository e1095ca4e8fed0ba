"""scalemech: activation-gradient alignment and depth expansion in normalized residual networks."""

__version__ = "0.1.0"
