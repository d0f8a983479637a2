"""Trace replay in one process: the trace a workload selects (read once per process), this
process's share of it, and the requests its entries become.

* :func:`selected_trace` reads and cuts the trace of a ``trace:`` section once per process
  (config checks it at init, so a bad line ends the run there with ``file:line``).
* :class:`TraceSchedule` hands this process's share (:func:`~.trace_select.split_for_worker`:
  every N-th request, sessions kept on one process) to free users in time order, each with its
  due time: trace time 0 is one wall-clock instant for every process (``t0``, sent by the
  master), so the union of the shares is the trace, at its own times.
* :class:`TraceWorkload` turns an entry into a request: a prompt of exactly ``input_tokens``
  words whose ``hash_ids`` blocks are the same text in every process
  (:func:`~.blocks.prompt_from_hash_ids`), and ``max_tokens`` = ``output_tokens``.

Pure apart from reading the file; the user sleeps until the due time and sends.

Usage::

    trace = selected_trace(spec.trace)                  # SelectedTrace: requests, rate, notes
    schedule = TraceSchedule(trace, worker_index=0, workers=2, t0=time.time() + 1)
    entry, due = schedule.take()                        # None once the share is handed out
    request = TraceWorkload(spec, scenario_seed=1, user_seed=7, model="m", text=src).request_for(entry)
    schedule.finished()                                 # after the request is recorded
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from llmload.workload.file.spec import TraceSpec
from llmload.workload.request import LLMRequest
from llmload.workload.tasks.agent import message_words
from llmload.workload.text import TextSource
from llmload.workload.trace.hash_blocks import prompt_from_hash_ids
from llmload.workload.trace.read import TraceRequest, load_trace, select, split_for_worker

CACHE_BLOCK = 16
"""The prefix-cache block a server hashes (vLLM and `llmload mock`: 16 tokens)."""


@dataclass
class SelectedTrace:
    spec: TraceSpec
    requests: list[TraceRequest]  # times in replay seconds from trace time 0
    notes: list[str] = field(default_factory=list)
    span_s: float = 0.0  # replay seconds from the first to the last request

    @property
    def sessions(self) -> bool:
        """An agentic trace: every entry is a call-graph session."""
        return any(r.graph is not None for r in self.requests)

    @property
    def rate(self) -> float | None:
        """Mean arrival rate of the replay (req/s over every process), None for a single instant."""
        return (len(self.requests) - 1) / self.span_s if self.span_s > 0 else None

    def expected_hit_ratio(self) -> float | None:
        """Share of prompt tokens a warm prefix cache can serve: for each request, its leading
        blocks already seen in an earlier request (whole 16-token blocks, never the last prompt
        token), over all prompt tokens. An upper bound: concurrent first uses and evictions miss."""
        root: dict[int, dict] = {}  # a trie of the id sequences seen so far
        hit = total = 0
        for r, block in _prompts(self.requests, self.spec.block_tokens):
            node, shared, leading = root, 0, True
            for hid in _prefix_ids(r):
                child = node.get(hid)
                if child is None:
                    child = node[hid] = {}
                    leading = False
                elif leading:
                    shared += 1
                node = child
            cached = min(shared * block, r.input_tokens)
            hit += min(cached // CACHE_BLOCK * CACHE_BLOCK, max(r.input_tokens - 1, 0))
            total += r.input_tokens
        return hit / total if total else None


def _prompts(requests: list[TraceRequest], block: int) -> Iterator[tuple[TraceRequest, int]]:
    """Every prompt of the trace and its tokens per hash id: a session's calls count one by one."""
    for r in requests:
        if r.graph is None:
            yield r, block
            continue
        for c in r.graph.calls:
            if c.messages is None:
                yield TraceRequest(r.t, c.input_tokens or 0, c.output_tokens or 0, c.hash_ids), c.block_tokens or block


def _prefix_ids(r: TraceRequest) -> tuple[int, ...]:
    if r.hash_ids:
        return r.hash_ids
    if r.prefix_id:
        return (prefix_block_id(r.prefix_id),)
    return ()


def prefix_block_id(prefix_id: str) -> int:
    """The block id of a plain trace's ``prefix_id``: above 2**32, so it never meets a numeric id."""
    return (1 << 32) + zlib.crc32(prefix_id.encode())


_cache: dict[TraceSpec, SelectedTrace] = {}


def selected_trace(spec: TraceSpec) -> SelectedTrace:
    """The trace of a ``trace:`` section, read and cut once per process (TraceError on bad input)."""
    got = _cache.get(spec)
    if got is None:
        read_until = None if spec.duration is None else spec.start + spec.duration
        trace = load_trace(spec.path, spec.format, models=spec.models, log_types=spec.log_types,
                           read_until_s=read_until)
        reqs = select(trace.requests, time_scale=spec.time_scale, start=spec.start, duration=spec.duration,
                      limit=spec.limit, loop=spec.loop)
        got = _cache[spec] = SelectedTrace(spec, reqs, list(trace.notes), reqs[-1].t - reqs[0].t)
    return got


class TraceSchedule:
    """This process's share of a trace, handed out in time order; knows when it is all sent."""

    def __init__(self, trace: SelectedTrace, worker_index: int, workers: int, t0: float,
                 on_done: Callable[[], None] | None = None) -> None:
        self.trace = trace
        self.share = split_for_worker(trace.requests, worker_index, workers, keep_sessions=True)
        self.t0 = t0
        self.scale = trace.spec.time_scale
        self.on_done = on_done
        self._next = 0
        self._out = 0
        self._turns: dict[str, int] = {}
        self.done = False

    def take(self) -> tuple[TraceRequest, float] | None:
        """The next entry and its due time (Unix seconds), or None when the share is handed out."""
        if self._next >= len(self.share):
            self._check_done()
            return None
        entry = self.share[self._next]
        self._next += 1
        self._out += 1
        return entry, self.t0 + entry.t

    def turn(self, entry: TraceRequest) -> int | None:
        """The entry's place in its session (1, 2, ...), None outside sessions."""
        if not entry.session_id:
            return None
        n = self._turns.get(entry.session_id, 0) + 1
        self._turns[entry.session_id] = n
        return n

    def finished(self) -> None:
        """One taken entry is recorded (sent, failed or cancelled)."""
        self._out -= 1
        self._check_done()

    def _check_done(self) -> None:
        if not self.done and self._next >= len(self.share) and self._out == 0:
            self.done = True
            if self.on_done is not None:
                self.on_done()


class TraceWorkload:
    """Requests for trace entries, for one user."""

    def __init__(self, spec: Any, scenario_seed: int, user_seed: int, model: str, text: TextSource,
                 images: Any = None, ignore_eos: bool | None = None, chat: bool = True) -> None:
        assert spec.trace is not None
        self.spec = spec
        self.block = spec.trace.block_tokens
        self.seed = scenario_seed
        self.model = model
        self.text = text
        self.images = images
        self.rng = random.Random(user_seed)
        self.ignore_eos = spec.ignore_eos if ignore_eos is None else ignore_eos
        self.chat = chat
        self._tag = f"r{user_seed:x}"
        self._n = 0

    def prompt(self, entry: TraceRequest) -> str:
        """Exactly ``input_tokens`` words: the entry's blocks, then request-unique words."""
        self._n += 1
        tag = f"{self._tag}n{self._n}"

        def fill(n: int) -> str:
            return self.text.text(self.rng, n, tag=tag)

        ids = _prefix_ids(entry)
        if not ids or entry.input_tokens == 0:
            return fill(entry.input_tokens)
        return prompt_from_hash_ids(ids, entry.input_tokens, self.block, seed=self.seed, fill=fill)

    def call_request(self, call: Any, results: dict[str, Any], session_id: str, turn: int) -> LLMRequest:
        """The request of one call of an agentic trace's session (``entry.graph``), its parents'
        results (:class:`~llmload.workload.tasks.graph_session.CallResult`) at hand: the recorded messages
        (after the first parent's prompt and live reply, for a ``parent`` call; an ancestor's
        recorded reply replaced by its live one where ``replies`` says), or a prompt of
        ``input_tokens`` words from the call's ``hash_ids`` blocks."""
        spec = self.spec
        system = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
        if call.messages is not None:
            messages = [dict(m) for m in call.messages]
            for k, ancestor in call.replies:  # the live reply where the trace has the recorded one
                messages[k]["content"] = results[ancestor].reply
            if call.context == "parent" and call.after:
                first = results[call.after[0]]
                messages = [*first.messages, {"role": "assistant", "content": first.reply}, *messages]
            elif system and not any(m.get("role") == "system" for m in messages):
                messages = [*system, *messages]
        else:
            entry = TraceRequest(0.0, call.input_tokens or 0, call.output_tokens or 1, call.hash_ids)
            block, self.block = self.block, call.block_tokens or self.block
            try:
                messages = [*system, {"role": "user", "content": self.prompt(entry)}]
            finally:
                self.block = block
        req = LLMRequest(scenario=spec.name, max_tokens=max(1, call.output_tokens or 1), model=self.model,
                         messages=messages, sampling=dict(spec.sampling), extra=dict(spec.extra),
                         session_id=session_id, turn=turn, want_text=True,
                         input_tokens=sum(message_words(m) for m in messages), step_kind="graph",
                         call_id=call.id, call_after="+".join(call.after))
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        if spec.trace.affinity_header:
            req.headers = {spec.trace.affinity_header: session_id}
        return req

    def request_for(self, entry: TraceRequest, rate: float | None = None, turn: int | None = None) -> LLMRequest:
        spec = self.spec
        text = self.prompt(entry)
        req = LLMRequest(scenario=spec.name, max_tokens=max(1, entry.output_tokens), model=self.model,
                         sampling=dict(spec.sampling), extra=dict(spec.extra), session_id=entry.session_id,
                         turn=turn, input_tokens=entry.input_tokens)
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        if spec.response_format is not None:
            req.extra["response_format"] = spec.response_format
        system = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
        if system:
            req.input_tokens = entry.input_tokens + len(spec.system_prompt.split())
        if not self.chat:
            req.prompt = "\n".join([*(m["content"] for m in system), text])
        elif self.images is not None:
            req.messages = [*system, {"role": "user", "content": self.images.content(text, self.rng)}]
            req.image_tokens = self.images.tokens
        else:
            req.messages = [*system, {"role": "user", "content": text}]
        return req
