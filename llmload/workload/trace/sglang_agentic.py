"""SGLang's agentic trace dataset (sgl-project/sglang ``python/sglang/benchmark/datasets/agentic_trace.py``,
``--dataset-name agentic-trace``) as call-graph sessions. Pure.

``{"metadata": {...}, "conversations": [[{"messages": [...], "prompt_tokens": N}, ...], ...]}``:
a conversation is a list of turns, each turn's ``messages`` only the new non-assistant messages
(OpenHands / SWE-smith trajectories padded to exact lengths). As ``bench_serving`` replays it:
turn k+1 is sent after turn k has ended, with turn k's prompt, the server's live reply and the new
messages; turns without messages are skipped; ``prompt_tokens`` is informational. The format has
no times, no fan-out and no output lengths: every conversation is due at trace time 0 (free users
take them in order, as ``--max-concurrency`` does), no gap between turns, and 220 output tokens
a turn (SGLang's default when ``--sharegpt-output-len`` is not given; ``output_tokens`` here).

Usage::

    entries = read_sglang(json.load(open(path)), path, 0)   # one TraceRequest per conversation
"""

from __future__ import annotations

from llmload.workload.trace.formats import TraceRequest
from llmload.workload.trace.graph_trace import RecordedCall, err, message_list, session_entry

DEFAULT_OUTPUT_TOKENS = 220  # SGLang's DEFAULT_AGENTIC_OUTPUT_LEN


def read_sglang(obj: dict, name: str, index: int, output_tokens: int | None = None) -> list[TraceRequest]:
    conversations = obj.get("conversations")
    if not isinstance(conversations, list) or not conversations:
        raise err(name, "conversations", "a non-empty list of conversations (lists of turns)", conversations)
    out_tokens = output_tokens or DEFAULT_OUTPUT_TOKENS
    entries = []
    for ci, conv in enumerate(conversations):
        key = f"conversations[{ci}]"
        if not isinstance(conv, list):
            raise err(name, key, "a list of turns ({messages, prompt_tokens})", conv)
        calls: list[RecordedCall] = []
        for ti, turn in enumerate(conv):
            if not isinstance(turn, dict):
                raise err(name, f"{key}[{ti}]", "a turn object ({messages, prompt_tokens})", turn)
            if not turn.get("messages"):
                continue  # as SGLang does
            msgs = message_list(turn["messages"], name, f"{key}[{ti}].messages")
            after = (calls[-1].id,) if calls else ()
            calls.append(RecordedCall(f"t{ti}", after, 0.0, 0.0, out_tokens, messages=msgs,
                                      context="parent" if after else "fresh"))
        if calls:
            entries.append(session_entry(f"conv{index + len(entries)}", calls, f"{name}: {key}"))
    if not entries:
        raise err(name, "conversations", "at least one turn with messages", len(conversations))
    return entries
