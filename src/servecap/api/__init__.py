"""The HTTP API (``servecap serve``, extra ``servecap[web]``): JSON under ``/api/v1/``.

Every response body is the same JSON the CLI prints with ``--json`` (one schema, documented in
docs/json-schema.md and served as OpenAPI at ``/openapi.json``); long work runs as jobs
(:mod:`servecap.api.jobs`). Errors are ``{"error": {"message", "field", "value"}}`` with the CLI's
one-line message: 400 for bad input, 404 for an unknown id, 429 when the job queue is full.
"""

from servecap.api.server import ServeSettings as ServeSettings
from servecap.api.server import create_app as create_app
