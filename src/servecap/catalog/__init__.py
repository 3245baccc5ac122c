"""Data files (GPUs, model config.json files) and their loaders. Adding a row is a data change."""

from servecap.catalog.gpus import gpu_catalog, load_gpu_file, lookup_gpu
from servecap.catalog.models import model_catalog, resolve_draft_model, resolve_model

__all__ = ["gpu_catalog", "load_gpu_file", "lookup_gpu", "model_catalog", "resolve_draft_model", "resolve_model"]
