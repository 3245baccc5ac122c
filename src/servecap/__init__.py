"""servecap: how many users can this GPU or fleet serve, at what latency and cost."""

__version__ = "0.1.0"
