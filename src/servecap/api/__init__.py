"""The HTTP API (``servecap serve``, extra ``servecap[web]``): JSON under ``/api/v1/``.

Every response body is the same JSON the CLI prints with ``--json`` (one schema, documented in
docs/json-schema.md and served as OpenAPI at ``/openapi.json``); long work runs as jobs
(:mod:`servecap.api.jobs`). Errors are ``{"error": {"message", "field", "value"}}`` with the CLI's
one-line message: 400 for bad input, 401 without the token, 403 for a foreign Host or Origin, 404
for an unknown id, 413 for a body past the limit, 422 for a damaged stored run, 429 when the job
queue is full, 500 (one line, traceback logged) for anything unforeseen.

The server reads no file a request names (:mod:`servecap.api.names`: catalog names and upload
ids only), answers only its own Host names, needs a token when bound beyond loopback and reads
bodies up to a limit (:mod:`servecap.api.guard`), and sizes a job's work before queueing it
(:mod:`servecap.app.limits`).
"""

from servecap.api.server import ServeSettings as ServeSettings
from servecap.api.server import create_app as create_app
