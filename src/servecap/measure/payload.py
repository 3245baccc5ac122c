"""Request bodies for a prompt of N tokens without a tokenizer.

The prompt is filler text of 4-character words (`` the``): one token per word for the BPE
tokenizers of Llama, Qwen, Mistral and GPT models, and exactly N by the emulator's
``ceil(characters / 4)`` estimate. Each prompt starts with a marker unique to the request (or
to its prefix group, for requests sharing a prefix), so a server's prefix cache shares exactly
the intended prefix and nothing more. The load generator puts a per-run nonce in both markers,
so a second run (or the next step of a sweep) never finds the first one's prompts cached. Servers count tokens their own way (chat templates add a
few); the load generator takes prompt and output counts from the server's ``usage``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Endpoint = Literal["completions", "chat"]
_WORD = " the"


def _marker(tag: str, tokens: int) -> str:
    """A unique word padded to a multiple of 4 characters and at most ``tokens`` x 4 long."""
    text = f" {tag}"
    text += " " * (-len(text) % 4)
    return text[: max(0, tokens) * 4]


def prompt_text(
    prompt_tokens: int, *, unique: str, prefix_group: int | None = None, prefix_tokens: int = 0, group_tag: str = ""
) -> str:
    """Filler prompt of ``prompt_tokens`` 4-character units; the first ``prefix_tokens`` are
    shared by the group (its marker is ``g<group_tag>-<group>``: a per-run tag keeps groups
    from sharing across runs), the rest start with a per-request marker (``unique``)."""
    n = max(1, prompt_tokens)
    k = min(max(0, prefix_tokens), n) if prefix_group is not None else 0
    prefix = ""
    if k:
        head = _marker(f"g{group_tag}-{prefix_group}" if group_tag else f"g{prefix_group}", k)
        prefix = head + _WORD * (k - len(head) // 4)
    rest_n = n - k
    rest = ""
    if rest_n:
        head = _marker(f"u{unique}", rest_n)
        rest = head + _WORD * (rest_n - len(head) // 4)
    return prefix + rest


def prompt_text_from_hashes(
    prompt_tokens: int, hash_ids: Sequence[int], block_tokens: int, *, unique: str, tag: str = ""
) -> str:
    """Filler prompt of ``prompt_tokens`` units whose block structure is a block-hash trace's:
    block ``t`` (``block_tokens`` units; the last one the prompt's tail) starts with the marker
    ``h<tag>-<hash_ids[t]>``, so two prompts share text exactly as far as their ids agree (the ids
    being prefix hashes, equal ids at a position mean equal blocks before it); tokens past the
    ids start with the per-request marker ``unique``."""
    n = max(1, prompt_tokens)
    parts: list[str] = []
    done = 0
    for h in hash_ids:
        if done >= n:
            break
        k = min(block_tokens, n - done)
        head = _marker(f"h{tag}-{h}", k)
        parts.append(head + _WORD * (k - len(head) // 4))
        done += k
    if done < n:
        head = _marker(f"u{unique}", n - done)
        parts.append(head + _WORD * (n - done - len(head) // 4))
    return "".join(parts)


def build_body(
    endpoint: Endpoint,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    stream: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An OpenAI request body: fixed output length (``ignore_eos``, ``min_tokens``) and usage
    in the stream (``stream_options.include_usage``)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
        "min_tokens": max_tokens,
        "temperature": 0.0,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if extra:
        body.update(extra)
    return body


def endpoint_path(endpoint: Endpoint) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
