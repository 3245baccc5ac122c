"""Use cases shared by the CLI and the HTTP API: pydantic requests in, pydantic responses out.

The ``--json`` output of a command is its response's ``model_dump_json()``; the HTTP API returns
the same models. Long work reports :class:`~servecap.progress.Progress` events.
"""
