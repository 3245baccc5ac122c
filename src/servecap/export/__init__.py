"""The config exporters: a fleet file or a plan as the configuration of the systems users
already run (docs/export.md). :mod:`~servecap.export.source` parses the input into one
:class:`~servecap.export.source.ExportInput`; one small module per target builds its document
(vLLM arguments, Kubernetes, KEDA, KServe, the production stack, Ray Serve, LiteLLM, a P/D
deployment); every setting a target cannot express becomes a warning, never a silent drop.

The use case (``servecap export``: the file read, the target chosen, the header and warnings
composed) is :mod:`servecap.app.export`.
"""
