"""What a server's usage object says, checked: the token counts llmload takes from it, each a whole
number 0 <= n < 2**32 or a :class:`UsageError` naming the field and the value (a count no table, CSV
or msgpack message can carry must not reach one), in the chat shape whatever API sent it (chat and
completions, the Responses API). Pure.
"""

from __future__ import annotations

from typing import Any

# The counts llmload takes from a usage object: (where in the server's usage, where in the chat shape).
CHAT_USAGE = ((("prompt_tokens",), "prompt_tokens"), (("completion_tokens",), "completion_tokens"),
              (("prompt_tokens_details", "cached_tokens"), "cached_tokens"))
RESPONSES_USAGE = ((("input_tokens",), "prompt_tokens"), (("output_tokens",), "completion_tokens"),
                   (("input_tokens_details", "cached_tokens"), "cached_tokens"))
# Above any context window by far (4.3 billion tokens), and small enough that a run's sums of counts
# (the stats table ships them in msgpack, 64 bits) cannot overflow within 2**32 requests of the largest:
# 2**53 per count (exact as a float) would let 2,048 such requests crash a worker's stats shipping.
MAX_COUNT = 1 << 32


class UsageError(ValueError):
    """A usage count a client cannot take: the message names the field and the value."""


def checked_count(value: Any, field: str) -> int | None:
    """A server's token count as an int 0 ≤ n < 2**32 (None when absent or null). A float with no
    fraction is taken (``12.0``); anything else (a bool, a string, 1.5, NaN, -1, 2**32) raises
    :class:`UsageError`: a count that no table, CSV or msgpack message can carry must not reach one."""
    if value is None:
        return None
    if type(value) is float and value.is_integer():  # NaN and infinities are not integers
        value = int(value)
    if type(value) is not int or not 0 <= value < MAX_COUNT:
        big = isinstance(value, int) and abs(value) >= 10**30  # 10**400 in JSON is a Python int
        shown = f"a {len(str(abs(value)))}-digit number" if big else repr(value)
        raise UsageError(f"usage.{field}: expected a whole number 0 <= n < 2**32, got {shown[:60]}")
    return value


def checked_usage(usage: dict[str, Any], fields: tuple = CHAT_USAGE) -> dict[str, Any]:
    """A server's usage object reduced to the counts llmload reads, in the chat shape
    (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``), each checked
    by :func:`checked_count`. A ``*_details`` that is not an object is ignored, as before."""
    out: dict[str, Any] = {}
    for path, name in fields:
        value: Any = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        count = checked_count(value, ".".join(path))
        if count is None:
            continue
        if name == "cached_tokens":
            out["prompt_tokens_details"] = {"cached_tokens": count}
        else:
            out[name] = count
    return out


def responses_usage(usage: Any) -> dict[str, Any] | None:
    """The Responses API's usage in the chat shape (prompt/completion tokens, cached tokens);
    raises :class:`UsageError` for a count :func:`checked_count` refuses."""
    if not isinstance(usage, dict):
        return None
    return checked_usage(usage, RESPONSES_USAGE)
