"""The one default request shape and user model of ``plan``, ``compare``, ``capacity``,
``simulate --users``, ``fleet plan``, ``fleet simulate`` and the web forms, stated on each
answer's first lines.

- Request shape: 1,024 prompt + 128 output tokens, fixed lengths: vLLM's ``benchmark_serving``
  random-dataset defaults (``--random-input-len 1024 --random-output-len 128``), the shape
  ``bench`` sends by default, so a measured run and a plan describe the same requests.
- Users: each sends one request every :data:`REQUEST_INTERVAL_S` = 30 s on average (reading the
  answer, typing the next question, and the answer itself), one turn per conversation (no
  history resent). By Little's law a user is generating ``G = TTFT + (O - 1) x TPOT`` seconds of
  every 30, so:

  * ``plan``'s duty cycle is ``G / 30`` and its users ``batch x 30 / G``; ``compare`` does the
    same per deployment (a faster one generates for less of the 30 s);
  * ``capacity``'s chat users think ``30 - G`` seconds (exponential) between an answer and the
    next request, whose closed form is the same ``batch x (G + Z) / G``;
  * ``fleet plan`` and ``fleet simulate`` turn ``N`` users into ``N / 30`` requests/s.

  Worked example (tests): a plan with TTFT 84.4 ms, TPOT 49.9 ms and 128 output tokens generates
  for ``0.0844 + 127 x 0.0499 = 6.42`` s: a duty cycle of 21.4% and a think time of 23.6 s.

Each command takes the same flags to change them: ``--prompt-tokens/-p``,
``--output-tokens/-o``, ``--prompt-sigma``, ``--output-sigma`` (log-normal lengths with those
medians), ``--think-time-s`` (``plan``, ``capacity``) and ``--request-interval-s`` (``plan``,
``fleet plan``).
"""

from __future__ import annotations

PROMPT_TOKENS = 1024
OUTPUT_TOKENS = 128
REQUEST_INTERVAL_S = 30.0
TURNS = 1


def duty_cycle(generating_s: float, request_interval_s: float = REQUEST_INTERVAL_S) -> float:
    """The share of a user's time spent generating: ``G / interval`` (at most 1)."""
    if request_interval_s <= 0:
        return 1.0
    return min(1.0, max(0.0, generating_s) / request_interval_s)


def think_time_s(generating_s: float, request_interval_s: float = REQUEST_INTERVAL_S) -> float:
    """Seconds a user thinks between an answer and the next request: ``interval - G`` (>= 0)."""
    return max(0.0, request_interval_s - max(0.0, generating_s))


def lengths_text(prompt: float, output: float, prompt_sigma: float | None, output_sigma: float | None) -> str:
    """``1,024 prompt + 128 output tokens (fixed)``, or the log-normal medians and sigmas."""
    fixed = not prompt_sigma and not output_sigma
    text = f"{prompt:,.0f} prompt + {output:,.0f} output tokens"
    if fixed:
        return text + " (fixed)"
    return text + f" (log-normal medians, sigma {prompt_sigma or 0:g} / {output_sigma or 0:g})"


def shape_line(
    prompt: float,
    output: float,
    *,
    prompt_sigma: float | None = None,
    output_sigma: float | None = None,
    users: str | None = None,
) -> str:
    """The first line of an answer: the request shape and the user model it assumed."""
    line = "request shape: " + lengths_text(prompt, output, prompt_sigma, output_sigma)
    return line + (f"; users: {users}" if users else "")
