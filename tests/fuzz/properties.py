"""Every parser's properties, once: what ``tests/fuzz/test_fuzz.py`` checks within the suite's budget
and ``benchmarks/fuzz.py`` runs for as long as it is asked.

Each :class:`Property` has a strategy (corpus mutations and small grammars, :mod:`.strategies`), a
check that raises AssertionError (or lets through an exception no parser documents) on a failure,
and the regression inputs earlier fuzzing found (``examples``: run first, every time).

The properties, per parser: it never raises anything but its own documented error; a stream parser
gives the same events however its input is split; parse → write → parse is stable where a writer
exists; and what it holds stays within its documented caps.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import yaml
from hypothesis import strategies as st
from locust.rpc import Message

from llmload.health.fleet import ClientView
from llmload.health.run_verdict import stall_phrase, timing_phrase
from llmload.metrics.histogram import Histogram
from llmload.metrics.stats import LLMStats
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.user_counts import UserCounts
from llmload.server_metrics.gpu import gpu_readings, gpu_samples
from llmload.server_metrics.parse import ExpositionError, parse_exposition
from llmload.sweep.plan import parse_plan
from llmload.wire import chunks
from llmload.wire.audio import audio_seconds, check_transcription
from llmload.wire.embeddings import check_embeddings, full_check
from llmload.wire.http1 import BodyDecoder, HTTPError, parse_head
from llmload.wire.inflate import SLICE, InflateError, Inflater
from llmload.wire.rerank import check_rerank, check_score, ranked_indices
from llmload.wire.sse import SSEDecoder, SSEError
from llmload.workload.file.scenario import parse_scenario
from llmload.workload.file.spec import ScenarioError
from llmload.workload.trace.formats import TraceError
from llmload.workload.trace.otel_spans import read_otel
from llmload.workload.trace.read import parse_trace
from llmload.workload.trace.sglang_agentic import read_sglang
from llmload.workload.trace.weka import read_weka
from tests.fuzz import corpus
from tests.fuzz.strategies import chat_chunks, dumps, json_values, mutated, mutated_json, pieces, with_cuts
from tests.support import payloads


@dataclass(frozen=True)
class Property:
    name: str
    strategy: Any
    check: Callable[[Any], None]
    examples: tuple = ()
    """Inputs earlier fuzzing failed on (each now a regression case)."""
    max_examples: int = 200
    """Examples per run of the suite's fuzz tier (its whole budget is 60 s)."""


PROPERTIES: list[Property] = []


def prop(name: str, strategy: Any, examples: tuple = (), max_examples: int = 200):
    def add(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        PROPERTIES.append(Property(name, strategy, fn, examples, max_examples))
        return fn
    return add


# -- SSE ---------------------------------------------------------------------------------------------------
_sse_line = st.sampled_from((b"data: {}", b"data:{\"a\":1}", b"data: [DONE]", b"data:", b"event: message_start",
                             b"event:", b": keep-alive", b"id: 7", b"retry: 10", b"", b"data: x" * 30)) | st.binary(
    max_size=12)
_sse_grammar = st.lists(st.tuples(_sse_line, st.sampled_from((b"\n", b"\r\n", b"\r"))), max_size=20).map(
    lambda lines: b"".join(a + b for a, b in lines))
_sse_input = st.one_of(_sse_grammar, mutated(corpus.event_streams()))


def _sse(data: bytes, at: list[int], max_bytes: int) -> list | str:
    d = SSEDecoder(max_bytes=max_bytes)
    out: list = []
    try:
        for piece in pieces(data, at):
            out.extend(d.feed(piece))
            assert d._partial_len <= max_bytes + 1 and d._data_len <= max_bytes, (d._partial_len, d._data_len)
        out.extend(d.flush())
    except SSEError:
        return "SSEError"
    return out


@prop("sse: split anywhere, same events; only SSEError; bounded",
      st.tuples(with_cuts(_sse_input), st.sampled_from((64, 1 << 20))), examples=(
          ((b'\x00ata: {"choices":[{"finish_reason":null,"index":0,"delta":{"role\r"', [65]), 64),
          ((b'\x00ata: {"choices":[{"finish_rea\rson":null,"index":0,"delta":{"role', [31]), 64),
          ((b"x" * 64 + b"\r\n", [65]), 64), ((b"data: " + b"x" * 58 + b"\n\n", [30]), 64)))
def sse_split(args) -> None:
    (data, at), max_bytes = args
    whole, split = _sse(data, [], max_bytes), _sse(data, at, max_bytes)
    assert whole == split, (whole, split)


# -- HTTP/1.1 ----------------------------------------------------------------------------------------------
_head_grammar = st.tuples(
    st.sampled_from((b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"http/1.1", b"HTTP/1.1x", b"")),
    st.sampled_from((b" 200 OK", b" 204", b" 99 x", b" 2000 x", b" -1 x", b" 404 Not Found", b"  200")),
    st.lists(st.sampled_from((b"Content-Length: 5", b"content-length: -3", b"Content-Length: 1e3",
                              b"Transfer-Encoding: chunked", b"Connection: close", b"X: y", b": nobody",
                              b"Bad Header", b"Content-Length: 99999999999999999999999", b" folded")), max_size=5),
).map(lambda t: t[0] + t[1] + b"".join(b"\r\n" + h for h in t[2]))


@prop("http head: only HTTPError", st.one_of(_head_grammar, mutated(corpus.heads())),
      examples=(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5",))
def http_head(raw: bytes) -> None:
    try:
        head = parse_head(raw)
        n = head.content_length
    except HTTPError:
        return
    assert 100 <= head.status <= 999 and all(k == k.lower() for k in head.headers), head
    assert n is None or n >= 0
    if raw.endswith(b"Content-Length: 5\r\nContent-Length: 5") and not head.chunked:
        assert n == 5  # a proxy that repeated the length: that length (RFC 9112 6.3)


_headers = st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,12}", fullmatch=True),
                           st.from_regex(r"[ -~]{0,20}", fullmatch=True).map(str.strip), max_size=5)


@prop("http head: written from its parts, parsed back to them",
      st.tuples(st.integers(100, 599), st.from_regex(r"[A-Za-z ]{0,12}", fullmatch=True), _headers))
def http_head_round_trip(args) -> None:
    status, reason, headers = args
    raw = (f"HTTP/1.1 {status} {reason}" + "".join(f"\r\n{k}: {v}" for k, v in headers.items())).encode()
    head = parse_head(raw)
    want: dict[str, str] = {}
    for k, v in headers.items():
        want[k.lower()] = f"{want[k.lower()]}, {v}" if k.lower() in want else v
    assert (head.status, head.headers) == (status, want), (head, want)


_chunked = st.lists(st.tuples(st.binary(max_size=40), st.sampled_from((b"", b";ext=1", b"; x", b";" + b"e" * 5000))),
                    max_size=6).map(lambda cs: b"".join(b"%x%s\r\n%s\r\n" % (len(d), e, d) for d, e in cs if d)
                                    + b"0\r\n\r\n")
_BODY_HEADS = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", b"HTTP/1.1 200 OK\r\nContent-Length: 40",
               b"HTTP/1.1 200 OK\r\nConnection: close", b"HTTP/1.1 204 No Content")


def _body(head: bytes, data: bytes, at: list[int]) -> tuple | str:
    d = BodyDecoder(parse_head(head))
    out, done = [], False
    try:
        for piece in pieces(data, at):
            if done and not piece:
                continue
            body, done = d.feed(piece)
            out.append(body)
            assert len(d._buf) <= 4096 + 2, len(d._buf)  # a size or trailer line at most, or a CRLF
    except HTTPError:
        return "HTTPError"
    return b"".join(out), done


@prop("http body: split anywhere, same body; only HTTPError; bounded buffer",
      st.tuples(st.sampled_from(_BODY_HEADS), with_cuts(st.one_of(_chunked, mutated(corpus.bodies())))),
      examples=((_BODY_HEADS[0], (b"5;" + b"e" * 5000 + b"\r\nhello\r\n0\r\n\r\n", [4097])),))
def http_body_split(args) -> None:
    head, (data, at) = args
    whole, split = _body(head, data, []), _body(head, data, at)
    assert whole == split, (whole, split)


# -- chunks, usage, Messages --------------------------------------------------------------------------------
_MESSAGES_NAMES = ("content_block_delta", "content_block_start", "message_start", "message_delta", "message_stop",
                   "error", "ping", "response.output_text.delta", "response.completed")
_event = st.one_of(mutated(tuple(e for e in corpus.events() if isinstance(e, bytes))), st.binary(max_size=64),
                   st.tuples(st.sampled_from(_MESSAGES_NAMES),
                             mutated(tuple(e[1] for e in corpus.events() if isinstance(e, tuple)) or (b"{}",))),
                   json_values.map(dumps))


@prop("chunk classifier and Messages events: never raise", _event)
def classify_never_raises(event) -> None:
    for want_text in (False, True):
        c = chunks.classify_event(event, want_text)
        assert c.bad is None or isinstance(c.bad, str)
        if c.usage:
            for v in (c.usage.get("prompt_tokens"), c.usage.get("completion_tokens")):
                assert v is None or (type(v) is int and 0 <= v < 2 ** 32)


def _seen(c: chunks.Chunk) -> tuple:
    """What the byte test decides; text and tool-call pieces are kept only when text is asked for, and
    then every event is parsed (record.StreamAccumulator, want_text)."""
    return (c.output, c.visible, c.finish_reason, c.usage, c.error, c.done, c.bad)


@prop("chunk classifier: the byte test agrees with the parse", chat_chunks, examples=(
    {"choices": [{"index": 0, "text": None, "finish_reason": None,
                  "delta": {"content": "0", "tool_calls": [{"index": 0}], "role": "assistant"}}]},
    {"choices": [{"index": 0, "logprobs": None, "finish_reason": None, "text": "0"},
                 {"index": 0, "finish_reason": "stop"}]},
    {"choices": [{"index": 0, "delta": {"content": "0"}, "finish_reason": "stop"},
                 {"index": 0, "finish_reason": None}]},
))
def classify_fast_path_agrees(obj: dict) -> None:
    p = dumps(obj)
    fast = chunks.classify(p)
    slow = chunks.classify(p, want_text=True)
    assert _seen(fast) == _seen(slow), (p, fast, slow)


_text_delta = st.fixed_dictionaries({"type": st.just("content_block_delta"), "index": st.integers(0, 2),
                                     "delta": st.fixed_dictionaries({"type": st.sampled_from(
                                         ("text_delta", "thinking_delta", "input_json_delta")),
                                         "text": st.text(max_size=6)}, optional={
                                         "partial_json": st.text(max_size=6), "thinking": st.text(max_size=4)})},
                                    optional={"error": st.just({"message": "x"})})


@prop("Messages: the text-delta byte test agrees with the parse", _text_delta)
def messages_fast_path_agrees(obj: dict) -> None:
    event = ("content_block_delta", dumps(obj))
    assert _seen(chunks.classify_event(event)) == _seen(chunks.classify_event(event, want_text=True)), obj


@prop("usage: only UsageError, counts 0 <= n < 2**32", json_values)
def usage_counts(usage) -> None:
    for fn in (lambda u: chunks.checked_usage(u) if isinstance(u, dict) else None, chunks.responses_usage,
               lambda u: chunks.messages_usage(u, True)):
        try:
            out = fn(usage)
        except chunks.UsageError:
            continue
        for v in (out or {}).values():
            v = v.get("cached_tokens") if isinstance(v, dict) else v
            assert type(v) is int and 0 <= v < 2 ** 32, out


# -- the inflater ---------------------------------------------------------------------------------------------
def _compress(data: bytes, kind: str, level: int) -> bytes:
    wbits = {"gzip": 31, "deflate": 15}[kind]
    c = zlib.compressobj(level, zlib.DEFLATED, wbits)
    return c.compress(data) + c.flush()


def _inflate(kind: str, data: bytes, at: list[int], max_bytes: int) -> bytes | str:
    inf = Inflater(kind, max_bytes=max_bytes)
    out = []
    try:
        for piece in pieces(data, at):
            read = 0
            for s in inf.slices(piece):
                assert len(s) <= SLICE
                read += len(s)
                out.append(s)
                inf.output_seen()
            assert read <= 2 * max_bytes, read
    except InflateError:
        return "InflateError"
    return b"".join(out)


@prop("inflater: split anywhere, same bytes; only InflateError; bounded per read",
      st.tuples(st.sampled_from(("gzip", "deflate")), st.binary(max_size=3000) | st.just(b"data: x\n\n" * 20000),
                st.integers(0, 9), st.data()))
def inflate_split(args) -> None:
    kind, raw, level, data = args
    packed = _compress(raw, kind, level)
    packed = data.draw(st.one_of(st.just(packed), mutated((packed,))))
    at = data.draw(st.lists(st.integers(0, len(packed)), max_size=6).map(sorted))
    whole, split = _inflate(kind, packed, [], 1 << 20), _inflate(kind, packed, at, 1 << 20)
    assert whole == split, (len(whole), len(split))
    if packed == _compress(raw, kind, level) and len(raw) <= 1 << 20:
        assert whole == raw


# -- whole-body answers ---------------------------------------------------------------------------------------
def _vectors(n: int, dim: int, fmt: str) -> list:
    import base64
    import struct
    if fmt == "base64":
        return [base64.b64encode(struct.pack(f"<{dim}f", *range(dim))).decode() for _ in range(n)]
    return [[0.5 * i for i in range(dim)] for _ in range(n)]


@st.composite
def _embeddings(draw):
    n, dim, fmt = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.sampled_from(("float", "base64")))
    obj = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": v}
                                      for i, v in enumerate(_vectors(n, dim, fmt))],
           "model": "m", "usage": {"prompt_tokens": draw(st.integers(0, 50)), "total_tokens": 1}}
    if draw(st.booleans()):
        obj = draw(mutated_json(obj))
    body = json.dumps(obj, separators=draw(st.sampled_from(((",", ":"), (", ", ": "))))).encode()
    return body, draw(st.integers(1, 4)), draw(st.none() | st.just(dim) | st.integers(1, 6)), fmt  # a batch has 1+


@prop("embeddings: the fast checks give the parse's verdict; never raise", _embeddings(), examples=(
    (b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0]},{"object":"embedding","index":1,'
     b'"embedding":[0.0]},null],"model":"m","usage":{"prompt_tokens":0,"total_tokens":1}}', 2, None, "float"),))
def embeddings_agree(args) -> None:
    body, inputs, dims, fmt = args
    fast, slow = check_embeddings(body, inputs, dims, fmt), full_check(body, inputs, dims, fmt)
    assert (fast.error is None) == (slow.error is None), (body[:300], fast, slow)
    if fast.error is None:
        assert (fast.prompt_tokens, fast.dimension) == (slow.prompt_tokens, slow.dimension), (fast, slow)


_rank = st.fixed_dictionaries({"results": st.lists(st.fixed_dictionaries(
    {"index": st.integers(-1, 4), "relevance_score": st.floats()}), max_size=4)}, optional={
    "usage": st.fixed_dictionaries({}, optional={"total_tokens": st.sampled_from((3, -1, 2 ** 40))}),
    "data": st.lists(st.fixed_dictionaries({"index": st.integers(0, 3), "score": st.floats()}), max_size=3)})
_whole_bodies = st.one_of(_rank.map(dumps), mutated(corpus.json_bodies() or (b"{}",)), json_values.map(dumps),
                          st.binary(max_size=40))


@prop("rerank, score and transcription answers: never raise; a passed ranking reads back",
      st.tuples(_whole_bodies, st.integers(0, 4)))
def whole_bodies(args) -> None:
    body, n = args
    for check, api in ((check_rerank(body, n, top_n=n or None), "rerank"), (check_score(body, n), "score")):
        assert check.error is None or isinstance(check.error, str)
        if check.error is None:  # what the user reads next, of an answer that passed (its documented use)
            assert sorted(ranked_indices(body, api)) == sorted(set(ranked_indices(body, api)))
    for fmt in ("json", "verbose_json", "text"):
        check_transcription(body, fmt)


_wav = st.binary(max_size=64).map(lambda b: b"RIFF\x24\x00\x00\x00WAVEfmt " + b) | st.binary(max_size=60).map(
    lambda b: b"fLaC" + b)


@prop("audio length from a header: only ValueError", st.tuples(st.sampled_from(("a.wav", "a_1.5s.mp3", "x.flac",
                                                                                 "a_0s.ogg", "a_1e400s.mp3")), _wav))
def audio_length(args) -> None:
    name, data = args
    try:
        s = audio_seconds(name, data)
    except ValueError:
        return
    assert s > 0 and math.isfinite(s), s


# -- /metrics --------------------------------------------------------------------------------------------------
@prop("prometheus and DCGM text: only ExpositionError; GPU readings never raise",
      st.one_of(mutated(corpus.expositions()), st.binary(max_size=200)), max_examples=100)
def exposition(body: bytes) -> None:
    try:
        exp = parse_exposition(body, source="fuzz")
    except ExpositionError:
        return
    for v in exp.samples.values():
        assert isinstance(v, float)
    gpu_readings(gpu_samples(exp))


_metric_name = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)


@prop("prometheus text: written by prometheus_client, parsed back to the same samples",
      st.dictionaries(_metric_name, st.tuples(st.sampled_from(("counter", "gauge")), st.dictionaries(
          st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), st.text(max_size=8), max_size=2),
          st.floats(min_value=0, max_value=1e12)), min_size=1, max_size=5), max_examples=100)
def exposition_round_trip(families: dict) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
    reg = CollectorRegistry()
    want = {}
    for name, (kind, labels, value) in families.items():
        labels = {k: v for k, v in labels.items() if k not in ("le", "quantile")}
        cls = Counter if kind == "counter" else Gauge
        m = cls(name, "fuzz", list(labels), registry=reg)
        child = m.labels(**labels) if labels else m
        child.inc(value) if kind == "counter" else child.set(value)
        sample = f"{name}_total" if kind == "counter" else name
        want[(sample, tuple(sorted(labels.items())))] = value
    exp = parse_exposition(generate_latest(reg), source="fuzz")
    got = {k: v for k, v in exp.samples.items() if k in want}
    assert got.keys() == want.keys() and all(math.isclose(got[k], want[k], rel_tol=1e-9) for k in want), (got, want)


# -- traces ------------------------------------------------------------------------------------------------------
def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines(keepends=True)


@prop("trace readers (Mooncake, Azure, BurstGPT, plain): only TraceError",
      st.tuples(st.sampled_from(("mooncake", "azure", "burstgpt", "plain", None)),
                st.sampled_from(("mooncake", "azure", "burstgpt", "plain")).flatmap(
                    lambda f: mutated((corpus.trace_files()[f],), max_edits=6))))
def flat_traces(args) -> None:
    fmt, data = args
    try:
        trace = parse_trace(_lines(data), "fuzz", fmt, max_requests=10_000)
    except TraceError:
        return
    for r in trace.requests:
        assert r.t >= 0 and math.isfinite(r.t) and r.input_tokens >= 0 and r.output_tokens >= 0, r


@prop("Mooncake trace: written as JSONL, read back to the same requests",
      st.lists(st.tuples(st.integers(0, 10 ** 9), st.integers(1, 1 << 20), st.integers(1, 1 << 16),
                         st.lists(st.integers(0, 2 ** 32 - 1), max_size=4)), min_size=1, max_size=20))
def mooncake_round_trip(rows: list) -> None:
    text = "".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h}) + "\n"
                   for t, i, o, h in rows)
    trace = parse_trace(text.splitlines(keepends=True), "fuzz", "mooncake")
    t0 = min(r[0] for r in rows)
    want = sorted(((t - t0) / 1000.0, i, o, tuple(h)) for t, i, o, h in rows)
    got = sorted((r.t, r.input_tokens, r.output_tokens, tuple(r.hash_ids)) for r in trace.requests)
    assert [(round(a, 6), *b) for a, *b in got] == [(round(a, 6), *b) for a, *b in want], (got, want)


_GRAPH = {"weka": read_weka, "otel": read_otel, "sglang": read_sglang}


@prop("agentic trace readers (Weka, OTel spans, SGLang): only TraceError",
      st.sampled_from(("weka", "otel", "sglang")).flatmap(
          lambda f: st.tuples(st.just(f), st.sampled_from(corpus.session_objects(f)).flatmap(mutated_json))),
      examples=(("otel", {"spans": [{"name": "chat gpt-4", "start_time": "2026-02-25T10:00:00.000000Z",
                                    "attributes": 1}]}),))
def graph_traces(args) -> None:
    fmt, obj = args
    if not isinstance(obj, dict):
        return
    try:
        _GRAPH[fmt](obj, "fuzz", 0)
    except TraceError:
        return


# -- files a user writes ------------------------------------------------------------------------------------------
@st.composite
def _yaml_edit(draw, texts: tuple[str, ...]):
    lines = draw(st.sampled_from(texts)).splitlines()
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(("value", "drop", "repeat", "indent")))
        if op == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(('-1', '.inf', '.nan', '1e400', '[]', '{}', 'null', 'x', '0', '*a', '&a 3', '!!binary AA==', '9' * 40)))}"  # noqa: E501
        elif op == "drop":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        else:
            lines[i] = "  " + lines[i]
    return "\n".join(lines) + "\n"


@prop("scenario YAML: only ScenarioError, in one line",
      st.one_of(_yaml_edit(corpus.scenario_texts()), json_values.map(lambda v: yaml.safe_dump({"workloads": v}))),
      examples=("workloads:\n  ? '\n\n    '\n  : false\n",))
def scenario_yaml(text: str) -> None:
    try:
        parse_scenario(text, "fuzz.yaml")
    except ScenarioError as e:
        assert "\n" not in str(e), str(e)


@prop("sweep plan: only its error (a ScenarioError)",
      st.one_of(_yaml_edit(corpus.plan_texts()), json_values.map(lambda v: yaml.safe_dump({"deployments": v}))))
def sweep_plan(text: str) -> None:
    try:
        parse_plan(text, "fuzz.yaml")
    except ScenarioError:
        pass


# -- what crosses a process (llmload's master↔worker messages) -------------------------------------------------------
_MESSAGES = {m.name: m for m in (*messages.TABLE, messages.FINAL)}
_honest = functools.cache(payloads.every_message)
_HOSTILE = st.one_of(st.sampled_from((math.nan, math.inf, -math.inf, 2 ** 64 - 1, -(2 ** 63), 10 ** 20, True, None, "",
                                      "yesterday", [], {}, b"\x00", "x" * 70_000)), json_values)


def ingest(message: messages.MessageType, payload: dict) -> None:
    """What the master does with a payload its gate took (links.MasterLink, roles.MasterRole._ingest)."""
    stats, view, users = LLMStats(), ClientView(), UserCounts()
    if message is messages.USERS:
        users.report("w1", payload["t"], payload["n"])
    if isinstance(payload, dict) and payload.get("stats"):
        stats.merge_wire(payload["stats"])
        stats.rows()
        stats.model_rows()
        for s in stats.scenarios.values():
            for h in s.hist.values():
                h.percentiles((50.0, 99.0))
    if isinstance(payload, dict) and "health" in payload:
        view.add("w1", payload["health"], payload["in_flight"], payload["index"])
        view.state()
        stall_phrase(view.stalls)
        timing_phrase(view.timing, view.stalls)
    rows = payload.get("rows") if isinstance(payload, dict) else None
    if rows:
        out = io.StringIO()
        w = csv.writer(out)
        for row in rows:
            users.total_at(row[1], "w1", row[16])
            w.writerow(row)
        h = Histogram()
        h.record_many([r[5] for r in rows if r[5] is not None])
        h.percentiles((50.0,))


@prop("messages: each honest payload passes its schema, survives msgpack, and is ingested",
      st.sampled_from(sorted(_MESSAGES)), max_examples=20)
def honest_messages(name: str) -> None:
    payload = _honest()[name]
    message = _MESSAGES[name]
    assert message.refusal(payload) == "", message.refusal(payload)
    wire = Message.unserialize(Message(name, payload, "w1").serialize()).data
    assert message.refusal(wire) == ""
    ingest(message, wire)


@prop("messages: a hostile payload is refused, or taken without an error anywhere in the master",
      st.sampled_from(sorted(_MESSAGES)).flatmap(
          lambda name: st.tuples(st.just(name), mutated_json(_honest()[name], _HOSTILE)
                                 if isinstance(_honest()[name], dict) else _HOSTILE)),
      max_examples=400)
def hostile_messages(args) -> None:
    name, payload = args
    message = _MESSAGES[name]
    try:
        wire = msgpack.loads(msgpack.dumps(payload), raw=False, strict_map_key=False)
    except (TypeError, ValueError, OverflowError):
        return  # not something msgpack can carry between processes
    why = message.refusal(wire)
    assert isinstance(why, str)
    if not why:
        ingest(message, wire)
