"""Request bodies are validated as vLLM's OpenAI server does (one strict model per endpoint):
each bad input gets a 400 in OpenAI's error shape naming the field, never a 200 or a bare 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from servecap.emulator.server import fixed_state
from servecap.measure.asgi_stream import StreamingASGITransport

VOCAB = 1000
CHAT = [{"role": "user", "content": "hello"}]


@pytest.fixture()
async def client() -> AsyncIterator[httpx.AsyncClient]:
    st = fixed_state(0.001, 0.001, model_name="m", max_model_len=256)
    st.vocab_size = VOCAB
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        yield c
    await st.driver.stop()


def _assert_openai_400(r: httpx.Response, param: str | None) -> str:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 400
    assert err["type"] == "BadRequestError" and err["param"] == param
    assert isinstance(err["message"], str) and err["message"]
    return str(err["message"])


CASES = [
    # (endpoint, extra fields, the field named)
    ("/v1/completions", {"max_tokens": "16"}, "max_tokens"),  # vLLM's lax pydantic would coerce it
    ("/v1/completions", {"max_tokens": True}, "max_tokens"),
    ("/v1/chat/completions", {"max_tokens": "16"}, "max_tokens"),
    ("/v1/chat/completions", {"max_completion_tokens": False}, "max_completion_tokens"),
    ("/v1/completions", {"max_tokens": 0}, "max_tokens"),  # SamplingParams: at least 1
    ("/v1/completions", {"temperature": -0.1}, "temperature"),  # non-negative
    ("/v1/completions", {"temperature": 2.5}, "temperature"),  # in [0, 2]
    ("/v1/chat/completions", {"temperature": -1}, "temperature"),
    ("/v1/completions", {"top_p": 1.5}, "top_p"),  # in (0, 1]
    ("/v1/completions", {"top_p": 0}, "top_p"),
    ("/v1/chat/completions", {"top_p": 1.01}, "top_p"),
    ("/v1/completions", {"best_of": 2}, "best_of"),  # vLLM's V1 engine refused best_of > 1
    ("/v1/completions", {"presence_penalty": 3}, "presence_penalty"),
    ("/v1/completions", {"repetition_penalty": 0}, "repetition_penalty"),
    ("/v1/completions", {"min_p": 1.5}, "min_p"),
    ("/v1/completions", {"top_k": -2}, "top_k"),
    ("/v1/completions", {"seed": 2**63}, "seed"),
    ("/v1/completions", {"n": 2}, "n"),
    ("/v1/completions", {"stream": "yes"}, "stream"),
    ("/v1/completions", {"stop": [""]}, None),  # vLLM: stop cannot contain an empty string
    ("/v1/completions", {"min_tokens": 20, "max_tokens": 10}, None),  # min_tokens <= max_tokens
]


@pytest.mark.parametrize(("path", "extra", "param"), CASES)
async def test_bad_field_is_a_400_naming_it(
    client: httpx.AsyncClient, path: str, extra: dict[str, object], param: str | None
) -> None:
    body: dict[str, object] = {"model": "m", **({"messages": CHAT} if "chat" in path else {"prompt": "hello"})}
    r = await client.post(path, json={**body, **extra})
    msg = _assert_openai_400(r, param)
    if param is not None:
        assert msg.startswith(param)


async def test_negative_prompt_token_id(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/completions", json={"model": "m", "prompt": [5, -1, 7]})
    msg = _assert_openai_400(r, "prompt.1")
    assert "greater than or equal to 0" in msg
    r = await client.post("/v1/completions", json={"model": "m", "prompt": [[5], [3, -2]]})
    _assert_openai_400(r, "prompt.1.1")


async def test_out_of_vocabulary_prompt_token_id(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/completions", json={"model": "m", "prompt": [1, VOCAB, 2]})
    assert "out of vocabulary" in _assert_openai_400(r, "prompt")
    r = await client.post("/v1/completions", json={"model": "m", "prompt": [[1], [VOCAB - 1, VOCAB + 5]]})
    assert f"Token id {VOCAB + 5}" in _assert_openai_400(r, "prompt")
    ok = await client.post("/v1/completions", json={"model": "m", "prompt": [0, VOCAB - 1], "max_tokens": 2})
    assert ok.status_code == 200


@pytest.mark.parametrize("number", [b"Infinity", b"-Infinity", b"NaN", b"1e999"])
async def test_non_finite_temperature(client: httpx.AsyncClient, number: bytes) -> None:
    raw = b'{"model": "m", "prompt": "hi", "temperature": ' + number + b"}"
    r = await client.post("/v1/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == 400


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
async def test_deeply_nested_body_is_a_400(client: httpx.AsyncClient, path: str) -> None:
    depth = 100_000
    r = await client.post(path, content=b"[" * depth + b"]" * depth)
    _assert_openai_400(r, None)
    r = await client.post(path, content=b'{"model": "m", "prompt": ' + b"[" * depth + b"]" * depth + b"}")
    _assert_openai_400(r, None)


async def test_deeply_nested_chat_content_is_a_400(client: httpx.AsyncClient) -> None:
    depth = 100_000
    nested = b"[" * depth + b"]" * depth
    raw = b'{"model": "m", "messages": [{"role": "user", "content": ' + nested + b"}]}"
    _assert_openai_400(await client.post("/v1/chat/completions", content=raw), None)
    part = b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "x": ' + nested + b"}]}]}"
    _assert_openai_400(await client.post("/v1/chat/completions", content=part), None)
    shallow = {
        "model": "m",
        "max_tokens": 2,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "abcd", "meta": [[[[1]]]]}]}],
    }
    assert (await client.post("/v1/chat/completions", json=shallow)).status_code == 200


@pytest.mark.parametrize("raw", [b"", b"{nope", b"[1, 2]", b'"text"', b"\xff\xfe", b"null"])
async def test_malformed_bodies(client: httpx.AsyncClient, raw: bytes) -> None:
    for path in ("/v1/completions", "/v1/chat/completions"):
        _assert_openai_400(await client.post(path, content=raw), None)


async def test_valid_requests_still_pass(client: httpx.AsyncClient) -> None:
    ok = {
        "model": "m",
        "prompt": "hello",
        "max_tokens": 3,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "seed": -1,
        "min_tokens": 3,
        "ignore_eos": True,
        "stop": ["\n"],
        "presence_penalty": -2,
    }
    assert (await client.post("/v1/completions", json=ok)).status_code == 200
    chat = {"messages": CHAT, "max_completion_tokens": 2, "temperature": 2, "logprobs": False}
    assert (await client.post("/v1/chat/completions", json=chat)).status_code == 200  # model optional, as vLLM


async def test_unknown_fields_are_ignored_as_vllm_does(client: httpx.AsyncClient) -> None:
    """The fields vLLM's router (vllm-router 0.1.x) adds when it forwards a request, and best_of=1:
    vLLM serves these (it logs the unknown ones), so the emulator must too."""
    completion = {
        "model": "m",
        "prompt": "hello",
        "max_tokens": 2,
        "echo": False,
        "no_stop_trim": False,
        "ignore_eos": False,
        "skip_special_tokens": True,
        "return_hidden_states": False,
        "best_of": 1,
    }
    assert (await client.post("/v1/completions", json=completion)).status_code == 200
    chat = {
        "messages": CHAT,
        "max_tokens": 2,
        "stream": False,
        "logprobs": False,
        "no_stop_trim": False,
        "continue_final_message": False,
        "separate_reasoning": True,
        "stream_reasoning": True,
        "return_hidden_states": False,
        "include_reasoning": True,
    }
    assert (await client.post("/v1/chat/completions", json=chat)).status_code == 200


async def test_an_internal_error_still_answers_in_openai_shape() -> None:
    st = fixed_state(0.001, 0.001, model_name="m")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    st.driver.submit = broken  # type: ignore[method-assign]
    async with httpx.AsyncClient(transport=StreamingASGITransport(st.driver_app()), base_url="http://e") as c:
        r = await c.post("/v1/completions", json={"model": "m", "prompt": "hello"})
    assert r.status_code == 500
    assert r.json()["error"] == {
        "message": "internal error: RuntimeError",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }


async def test_nulls_and_defaults_as_vllm(client: httpx.AsyncClient) -> None:
    body = {"model": "m", "prompt": "hello", "max_tokens": 2, "stream": True, "stream_options": {}}
    r = await client.post("/v1/completions", json=body)
    assert '"usage":{"prompt_tokens":2' in r.text  # include_usage defaults to true, as in vLLM
    body = {
        "model": "m",
        "prompt": "hello",
        "max_tokens": 2,
        "stream": None,
        "echo": None,
        "stream_options": {"include_usage": None},
    }
    r = await client.post("/v1/completions", json=body)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2
