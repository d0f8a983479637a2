"""The Weka agentic-coding trace (AIPerf's AgentX replay, ai-dynamo/aiperf PR #1165,
``weka_trace_models.py`` / ``weka_trace.py``) as call-graph sessions. Pure.

One JSON object per recorded session: ``id``, ``block_size`` (tokens per hash id),
``hash_id_scope: local`` (ids are the session's own), and ``requests``, in order: API calls
(``type`` ``n`` or ``s``: ``t`` seconds, ``in`` and ``out`` tokens, ``hash_ids``, optional
``api_time`` seconds) and sub-agents (``type: subagent``: ``t`` (spawn), ``agent_id``,
``status``, ``duration_ms``, and its own ``requests``). What the graph is, as AIPerf reads it:

* the session's calls form one chain (each after the one before);
* a sub-agent's calls form a chain of their own, started after the last session call before the
  marker (a fan-out when several markers follow one call); an inner ``t`` before the spawn is
  relative to it (older captures);
* the join: the first session call after the marker whose ``t`` is at or after the sub-agent's end
  (``t + duration_ms``, else its last call's ``t + api_time``) waits for it as well; a sub-agent
  with ``status: async_launched`` ran in the background and is joined by none;
* a prompt is ``in`` words whose leading ``block_size``-word blocks are the text of ``hash_ids``;
  ids are scoped to the session (two sessions' id 7 are different text).

Usage::

    entries = read_weka(json.load(open(path)), path, 0)     # one TraceRequest per session
"""

from __future__ import annotations

import zlib

from llmload.workload.trace.formats import TraceError, TraceRequest
from llmload.workload.trace.graph_trace import RecordedCall, err, seconds, session_entry, whole

CALL_TYPES = ("n", "s")
JOIN_EPSILON_S = 1e-6  # AIPerf's _JOIN_EPSILON_SECONDS


def _scoped(ids: object, scope: int, name: str, key: str) -> tuple[int, ...]:
    if not isinstance(ids, list) or not all(type(h) is int and 0 <= h < 1 << 32 for h in ids):
        raise err(name, key, "a list of whole numbers 0..2**32-1", ids)
    return tuple((scope << 32) | h for h in ids)  # the session's own namespace


def _call(r: object, cid: str, after: tuple[str, ...], t_base: float | None, scope: int, block: int,
          name: str, where: str) -> RecordedCall:
    if not isinstance(r, dict):
        raise err(name, where, "an object (an API call)", r)
    if r.get("type") not in CALL_TYPES:
        raise err(name, f"{where}.type", "n or s (an API call; a sub-agent cannot nest)", r.get("type"))
    t = seconds(r, "t", name, f"{where}.")
    if t_base is not None and t + JOIN_EPSILON_S < t_base:
        t += t_base  # relative to the spawn (older captures)
    api = r.get("api_time")
    api_s = seconds(r, "api_time", name, f"{where}.") if api is not None else 0.0
    return RecordedCall(cid, after, t, t + max(api_s, 0.0), whole(r, "out", name, f"{where}."),
                        input_tokens=whole(r, "in", name, f"{where}."),
                        hash_ids=_scoped(r.get("hash_ids", []), scope, name, f"{where}.hash_ids"), block_tokens=block)


def read_weka(obj: dict, name: str, index: int) -> list[TraceRequest]:
    sid = obj.get("id")
    if not isinstance(sid, str | int) or isinstance(sid, bool) or sid == "":
        raise err(name, "id", "the session's id (a string)", sid)
    sid = str(sid)
    block = whole(obj, "block_size", name, "")
    if block < 1:
        raise err(name, "block_size", "a whole number >= 1 (tokens per hash id)", block)
    if obj.get("hash_id_scope", "local") != "local":
        raise TraceError(f"{name}: hash_id_scope: only local (ids scoped to each session) is defined, "
                         f"got {obj.get('hash_id_scope')!r}")
    requests = obj.get("requests")
    if not isinstance(requests, list) or not requests:
        raise err(name, "requests", "a non-empty list of API calls and sub-agents", requests)
    scope = zlib.crc32(sid.encode())
    mains: list[tuple[int, RecordedCall]] = []  # (index in requests, call)
    agents: list[tuple[int, list[RecordedCall], float, bool]] = []  # (index, chain, end, background)
    prev: str | None = None
    for i, r in enumerate(requests):
        where = f"requests[{i}]"
        if isinstance(r, dict) and r.get("type") == "subagent":
            agents.append((i, *_subagent(r, i, prev, scope, block, name, where)))
            continue
        c = _call(r, f"r{i}", (prev,) if prev else (), None, scope, block, name, where)
        mains.append((i, c))
        prev = c.id
    joins: dict[str, list[str]] = {}
    for i, chain, end, background in agents:
        if background or not chain:
            continue
        for j, c in mains:
            if j > i and c.start_s + JOIN_EPSILON_S >= end:
                joins.setdefault(c.id, []).append(chain[-1].id)
                break
    calls = [RecordedCall(c.id, c.after + tuple(joins.get(c.id, ())), c.start_s, c.end_s, c.output_tokens,
                          c.input_tokens, c.hash_ids, block_tokens=block) for _, c in mains]
    for _, chain, _, _ in agents:
        calls.extend(chain)
    return [session_entry(sid, calls, name)]


def _subagent(r: dict, i: int, spawner: str | None, scope: int, block: int, name: str,
              where: str) -> tuple[list[RecordedCall], float, bool]:
    """A sub-agent's chain, its recorded end and whether it ran in the background."""
    t = seconds(r, "t", name, f"{where}.")
    inner = r.get("requests", [])
    if not isinstance(inner, list):
        raise err(name, f"{where}.requests", "a list of the sub-agent's API calls", inner)
    chain: list[RecordedCall] = []
    prev = spawner
    for k, ir in enumerate(inner):
        c = _call(ir, f"a{i}.{k}", (prev,) if prev else (), t, scope, block, name, f"{where}.requests[{k}]")
        chain.append(c)
        prev = c.id
    dur = r.get("duration_ms")
    if dur is not None:
        end = t + max(seconds(r, "duration_ms", name, f"{where}."), 0.0) / 1000.0
    else:
        end = max((c.end_s for c in chain), default=t)
    return chain, end, r.get("status") == "async_launched"
