from servecap.emulator.protocol import estimate_text_tokens
from servecap.measure.payload import build_body, prompt_text


def test_prompt_is_exactly_n_tokens_by_the_4_char_rule() -> None:
    for n in (1, 2, 7, 100, 1000):
        text = prompt_text(n, unique=str(n * 12345))
        assert len(text) == 4 * n
        assert estimate_text_tokens(text) == n


def test_prefix_group_shares_exactly_the_prefix() -> None:
    a = prompt_text(100, unique="1", prefix_group=3, prefix_tokens=40)
    b = prompt_text(100, unique="2", prefix_group=3, prefix_tokens=40)
    assert a[:160] == b[:160] and a[160:] != b[160:]
    assert len(a) == 400


def test_body_fixes_the_output_length_and_asks_for_usage() -> None:
    body = build_body("chat", model="m", prompt="hi", max_tokens=7)
    assert body["max_tokens"] == 7 and body["ignore_eos"] is True and body["min_tokens"] == 7
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "hi"}]
