"""How long a response may take and how many output events it may send: the three deadlines of a
request (first token, between output events, in all) and the output-event cap tied to max_tokens.
The reader's checker enforces both (:mod:`llmload.transport.stream`, :mod:`llmload.transport.sdk`).

Usage::

    d = Deadlines(first_token=60, idle=600, request=None)
    d.detail(t0, times)              # "no first token within 60 s"
    output_event_cap(max_tokens)     # more output events than this: "server ignored max_tokens"
"""

from __future__ import annotations

NO_MAX_TOKENS_EVENTS = 1 << 18  # output events of a request sent without max_tokens: ~8 MiB of timestamps


def output_event_cap(max_tokens: int | None) -> int:
    """How many output events a request may get before it ends as ``server ignored max_tokens``.

    A server sends at most one output event per token (reasoning and content tokens are separate
    events, and both count against max_tokens on vLLM, SGLang and OpenAI); usage-only, role and
    keep-alive events are not output events. The slack covers servers that send a token in pieces,
    several choices (``n``), and reasoning that some APIs (DeepSeek's) do not count against
    max_tokens: twice max_tokens, and never less than max_tokens + 8,192."""
    if max_tokens is None or max_tokens <= 0:
        return NO_MAX_TOKENS_EVENTS
    return max(2 * max_tokens + 16, max_tokens + 8192)


def over_cap_error(max_tokens: int | None, cap: int) -> str:
    if max_tokens is None or max_tokens <= 0:
        return f"more than {cap} output events for a request without max_tokens"
    return f"server ignored max_tokens: more than {cap} output events for max_tokens={max_tokens}"


class Deadlines:
    """How long a request may wait for its first output event, between output events, and in all
    (``request``: ``--request-deadline``, None for no limit)."""

    __slots__ = ("first_token", "idle", "request")

    def __init__(self, first_token: float, idle: float, request: float | None = None) -> None:
        self.first_token = first_token
        self.idle = idle
        self.request = request

    def detail(self, t0: float, times: list[float]) -> str:
        """What a request that timed out waited for (the deadline that passed first)."""
        idle = times[-1] + self.idle if times else t0 + self.first_token
        if self.request is not None and t0 + self.request <= idle:
            return f"the request took longer than --request-deadline {self.request:g} s"
        if times:
            return f"no output event for {self.idle:g} s"
        return f"no first token within {self.first_token:g} s"
