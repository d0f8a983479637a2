"""The openai-SDK transport (``--transport openai``): the official SDK builds and sends the request
(auth, headers, query, proxies and TLS as the SDK and its HTTP client do them), and the body's
bytes go through llmload's own SSE decoder and chunk classification, so both transports apply one
set of metric definitions to the same bytes (``[DONE]`` included). Events are stamped when the
SDK's HTTP client hands their bytes over, so this path's timings include its own overhead.

Usage::

    t = OpenAITransport("http://127.0.0.1:8000", "/v1/chat/completions", ClientOptions(timeout=60))
    rec = t.stream(body_bytes, meta)   # same contract as FastTransport.stream
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gevent

from llmload.metrics import record as R
from llmload.transport.connection import ClientOptions
from llmload.transport.deadlines import Deadlines, output_event_cap, over_cap_error
from llmload.transport.sdk_bodies import cap_body, inflated_reads, inflater_for
from llmload.transport.stream import MAX_ERROR_BODY, take_events
from llmload.transport.target import Target
from llmload.wire.chunks import classify_event
from llmload.wire.inflate import InflateError
from llmload.wire.protocol import error_message
from llmload.wire.sse import SSEDecoder

_KIND_SUFFIX = {"chat": "/chat/completions", "completions": "/completions", "responses": "/responses"}
_STANDARD_KEYS = {
    "chat": {"model", "messages", "max_tokens", "max_completion_tokens", "stream_options", "temperature", "top_p", "n",
             "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
             "user", "tools", "tool_choice", "response_format", "reasoning_effort"},
    "completions": {"model", "prompt", "max_tokens", "stream_options", "temperature", "top_p", "n", "stop", "seed",
                    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "user"},
    "responses": {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools",
                  "tool_choice", "reasoning", "text", "user"},
}


class OpenAITransport:
    """The official openai SDK sends; see the module docstring."""

    def __init__(self, base_url: str, path: str, options: ClientOptions | None = None, **settings: Any) -> None:
        """``settings`` override fields of ``options`` (``timeout=60``, ``api_key=...``)."""
        import openai

        self._openai = openai
        self.options = options = dataclasses.replace(options or ClientOptions(), **settings)
        self.target = target = Target(base_url, path, options.query)
        bare = target.path.split("?", 1)[0].rstrip("/")
        if bare.endswith("/messages"):
            raise ValueError(f"{path}: the openai SDK has no Anthropic Messages API; use --transport fast")
        self.kind = next((k for k, sfx in _KIND_SUFFIX.items() if bare.endswith(sfx)), "chat")
        base_path = bare[: -len(_KIND_SUFFIX[self.kind])]
        headers: dict[str, Any] = {"Accept-Encoding": "identity", **dict(options.headers)}
        self._request_headers: dict[str, Any] = {}
        if options.api_key and options.api_key_header.lower() != "authorization":
            headers[options.api_key_header] = options.api_key
            # the SDK honours an omitted Authorization only among a request's own headers
            self._request_headers["Authorization"] = openai.Omit()
        query = dict(tuple(q.split("=", 1)) if "=" in q else (q, "") for q in target.query.split("&") if q)
        self._deadlines = Deadlines(options.first_token_deadline, options.timeout, options.request_deadline)
        self.client = openai.OpenAI(
            base_url=f"{target.scheme}://{target.host_header}{base_path}", api_key=options.api_key or "EMPTY",
            max_retries=0, timeout=openai.Timeout(options.timeout, connect=options.connect_timeout),
            default_headers=headers, default_query=query or None,
            # no redirects: a gateway's redirect is reported (http_3xx), as the fast transport does
            http_client=openai.DefaultHttpxClient(verify=options.ssl_context() if target.scheme == "https" else True,
                                                  follow_redirects=False, event_hooks={"response": [cap_body]}),
        )

    def connect(self) -> None:
        """Open a pooled connection ahead of the first request (the SDK connects lazily), and load
        the SDK's modules for this endpoint, which it imports on first use (inside the first TTFT)."""
        self._create()
        try:
            self.client.with_options(timeout=5.0).models.list()
        except Exception:  # noqa: BLE001 - servers without /v1/models, or an answer cut at MAX_ERROR_BODY
            pass  # the first request connects instead

    def close(self) -> None:
        self.client.close()

    def _create(self) -> Callable[..., Any]:
        api = self.client.with_streaming_response
        if self.kind == "responses":
            return api.responses.create
        return api.chat.completions.create if self.kind == "chat" else api.completions.create

    def stream(self, body: bytes | dict[str, Any], meta: R.RequestMeta, want_text: bool = False,
               headers: dict[str, str] | None = None,
               on_cancel: Callable[[R.RequestRecord], None] | None = None) -> R.RequestRecord:
        """Same contract as :meth:`FastTransport.stream`."""
        openai = self._openai
        fields = json.loads(body) if isinstance(body, bytes | bytearray) else dict(body)
        fields.pop("stream", None)
        keys = _STANDARD_KEYS[self.kind]
        std = {k: v for k, v in fields.items() if k in keys}
        extra_body = {k: v for k, v in fields.items() if k not in keys}
        hdrs = {"X-Request-Id": meta.request_id, **self._request_headers, **(headers or {})}
        meta.start_time = time.time()
        t0 = perf_counter()
        acc = R.StreamAccumulator(t0, want_text)
        sse = SSEDecoder(self.options.max_event_bytes)
        state, detail, code = "complete", "", None
        received = 0  # the body's bytes as the SDK's HTTP client handed them over (Locust's size)
        watchdog: gevent.Greenlet | None = None
        timed_out: list[str] = []
        reading = [True]  # cleared before this call leaves its reading: a deadline is thrown only inside it
        try:
            with self._create()(stream=True, extra_headers=hdrs, extra_body=extra_body or None, **std) as resp:
                code = resp.status_code
                ctype = resp.headers.get("content-type", "")
                acc.content_encoding = resp.headers.get("content-encoding", "").lower()
                if "event-stream" not in ctype.lower():
                    raw = b"".join(_take(resp.iter_bytes(), MAX_ERROR_BODY))
                    return R.failed_record(meta, R.PROTOCOL_ERROR, self.options.redact(
                        f"expected an event stream, got {ctype or 'no Content-Type'}: {error_message(raw)}"),
                        http_status=code, e2e_ms=(perf_counter() - t0) * 1000.0)
                try:
                    inflater = inflater_for(acc.content_encoding, self.options.max_event_bytes)
                except InflateError as e:
                    return R.failed_record(meta, R.PROTOCOL_ERROR, str(e), http_status=code,
                                           e2e_ms=(perf_counter() - t0) * 1000.0)
                watchdog = gevent.spawn(self._watch, acc, gevent.getcurrent(), timed_out, reading)
                times = acc.times
                max_events = output_event_cap(meta.max_tokens)
                try:
                    # raw reads, inflated here in bounded slices (httpx would inflate each read whole)
                    for data in inflated_reads(resp.http_response.iter_raw(), inflater):
                        n = len(times)
                        received += len(data)
                        take_events(acc, sse, data, perf_counter(), want_text)
                        if acc.done or acc.bad is not None:
                            break
                        if len(times) > n:
                            if inflater is not None:
                                inflater.output_seen()
                            if len(times) > max_events:
                                acc.bad = over_cap_error(meta.max_tokens, max_events)
                                break
                except InflateError as e:
                    acc.bad = str(e)[:200]
        except openai.APIStatusError as e:
            return R.failed_record(meta, R.status_for_http(e.status_code),
                                   self.options.redact(_status_message(e)), http_status=e.status_code,
                                   e2e_ms=(perf_counter() - t0) * 1000.0,
                                   retry_after=e.response.headers.get("retry-after", ""))
        except openai.APITimeoutError:
            state, detail = "timeout", f"no bytes for {self.options.timeout:g} s"
        except openai.APIConnectionError as e:
            if code is None and not timed_out:
                return R.failed_record(meta, R.CONNECT_ERROR, self.options.redact(f"{e}: {e.__cause__}")[:300],
                                       e2e_ms=(perf_counter() - t0) * 1000.0)
            state, detail = "eof", f"connection closed mid-stream: {e.__cause__ or e}"[:300]
        except BaseException as e:
            if isinstance(e, _Deadline) or (isinstance(e, Exception) and timed_out):
                pass  # the watchdog ended the request
            elif isinstance(e, Exception):  # the HTTP layer raising past the SDK's wrappers
                state, detail = "eof", f"connection closed mid-stream: {e.__class__.__name__}: {e}"[:300]
            else:
                if on_cancel is not None:
                    on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=code))
                raise
        finally:
            reading[0] = False
            if watchdog is not None:
                watchdog.kill(block=False)
        t_end = perf_counter()
        if timed_out:
            state, detail = "timeout", timed_out[0]
        elif state == "complete" and not acc.done and acc.bad is None:
            try:
                for ev in sse.flush():  # an unterminated last event of a complete body
                    acc.add(classify_event(ev, want_text), t_end)
            except ValueError as e:  # SSEError: the last line was over the limit
                acc.bad = str(e)
        rec = acc.finish(meta, state, t_end, http_status=code, detail=detail)
        rec.response_bytes, rec.clock_stamped = received, True  # stamped when the SDK hands the bytes over
        return rec

    def _watch(self, acc: R.StreamAccumulator, user: Any, timed_out: list[str], reading: list[bool]) -> None:
        """The deadlines (first token, between output events, the whole request): interrupt the read.

        Not with ``gevent.kill``: it throws from a callback of the hub's next turn, and when the
        read ended meanwhile (the stream's last bytes came in the same turn) the exception landed
        wherever the user next waited, outside this call (once in a test's teardown, on a busy host).
        The callback here throws only while the call is still reading."""
        d = self._deadlines
        while True:
            times = acc.times
            deadline = times[-1] + d.idle if times else acc.t0 + d.first_token
            if d.request is not None:
                deadline = min(deadline, acc.t0 + d.request)
            left = deadline - perf_counter()
            if left <= 0:
                timed_out.append(d.detail(acc.t0, times))
                gevent.get_hub().loop.run_callback(_interrupt, user, reading, _Deadline(timed_out[0]))
                return
            gevent.sleep(left)


class _Deadline(Exception):
    """Raised into the user's greenlet when a deadline passes while the SDK reads."""


def _interrupt(user: Any, reading: list[bool], exc: _Deadline) -> None:
    if reading[0] and not user.dead:
        user.throw(exc)


def _take(chunks: Any, limit: int) -> list[bytes]:
    out, n = [], 0
    for c in chunks:
        out.append(c)
        n += len(c)
        if n >= limit:
            break
    return out


def _status_message(e: Any) -> str:
    code = e.status_code
    if 300 <= code < 400:
        where = e.response.headers.get("location", "?")
        return f"HTTP {code} redirect to {where}: llmload does not follow redirects; use the final URL"
    try:
        return error_message(e.response.content[:MAX_ERROR_BODY])
    except Exception:  # the body of a streamed error may be unread
        return str(e.message)[:300]
