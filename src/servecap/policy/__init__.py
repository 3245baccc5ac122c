"""Pure policies: routers, autoscalers, rate limiters, caches and model routing.

No I/O, no numpy/httpx/fastapi (an import-linter contract enforces it); the clock and the random
generator are passed in. Each axis has a literal ``dict[str, type]`` registry. The fleet
simulator and the live monitor's advice use the same classes.
"""
