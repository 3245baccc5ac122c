"""The emulator's OpenAPI document (``GET /openapi.json``): FastAPI's for the routes it serves,
plus the two completion routes, which are plain ASGI (see :mod:`servecap.emulator.app`) and so
absent from FastAPI's, with their request bodies from the pydantic models that validate them
and OpenAI's error shape for every error status."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

from servecap.emulator.protocol import ChatRequest, CompletionRequest

_REF = "#/components/schemas/{model}"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": "integer"},
            },
        }
    },
}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorResponse")}}},
    }


def openapi_schema(api: FastAPI) -> dict[str, Any]:
    """The whole document (built from ``api.openapi()``, which FastAPI caches; copied here)."""
    schema = copy.deepcopy(api.openapi())
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorResponse"] = ERROR_SCHEMA
    for op in (o for path in schema.get("paths", {}).values() for o in path.values()):
        op.get("responses", {}).pop("422", None)  # FastAPI's default; validation errors are 400 here
    for path, model, op_id in (
        ("/v1/completions", CompletionRequest, "create_completion"),
        ("/v1/chat/completions", ChatRequest, "create_chat_completion"),
    ):
        body = model.model_json_schema(ref_template=_REF)
        components.update(body.pop("$defs", {}))
        components[model.__name__] = body
        schema.setdefault("paths", {})[path] = {
            "post": {
                "operationId": op_id,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}},
                },
                "responses": {
                    "200": {
                        "description": "The completion: one JSON body, or server-sent events when stream is true",
                        "content": {
                            "application/json": {"schema": {"type": "object"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "400": _error("Invalid request body"),
                    "404": _error("Unknown model"),
                    "503": _error("Waiting queue full"),
                },
            }
        }
    return schema
