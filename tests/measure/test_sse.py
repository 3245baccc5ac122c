from servecap.measure.sse import SseParser


def test_events_split_across_chunks_and_line_endings() -> None:
    p = SseParser()
    stream = b'data: {"a": 1}\n\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n'
    events = []
    for i in range(len(stream)):  # one byte at a time: the worst split
        events += p.feed(stream[i : i + 1])
    assert [e.data for e in events] == ['{"a": 1}', "x\ny", "[DONE]"]
    assert p.buffered_bytes == 0


def test_event_field_and_unfinished_event() -> None:
    p = SseParser()
    assert p.feed(b"event: error\ndata: boom\n\ndata: partial")[0].event == "error"
    assert p.buffered_bytes == len("data: partial")


def test_lone_cr_line_ends() -> None:
    p = SseParser()
    assert [e.data for e in p.feed(b"data: a\r\rdata:b\r\r")] == ["a", "b"]
