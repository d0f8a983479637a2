"""The openai-SDK transport (``--transport openai``): the official SDK builds and sends the request
(auth, Azure, proxies as the SDK does them) and its ``Stream`` yields chunk objects. The SDK
swallows ``[DONE]``, so here a stream counts as complete when a ``finish_reason`` arrived.

Usage::

    t = OpenAITransport("http://127.0.0.1:8000", "/v1/chat/completions", timeout=60)
    rec = t.stream(body_bytes, meta)   # same contract as FastTransport.stream
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

from llmload import record as R
from llmload.protocol import error_message, interpret
from llmload.transport.target import Target


class OpenAITransport:
    """The official openai SDK, for exact SDK behaviour; see the module docstring."""

    _STANDARD_KEYS = frozenset({
        "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "stream_options", "temperature",
        "top_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
        "top_logprobs", "user", "tools", "tool_choice", "response_format", "reasoning_effort",
    })

    def __init__(self, base_url: str, path: str, api_key: str | None = None, timeout: float = 600.0,
                 connect_timeout: float = 10.0) -> None:
        import openai

        self._openai = openai
        target = Target(base_url, path)
        self.chat = path.rstrip("/").endswith("chat/completions")
        suffix = "/chat/completions" if self.chat else "/completions"
        base_path = target.path[: -len(suffix)] if target.path.endswith(suffix) else target.path.rsplit("/", 1)[0]
        self.client = openai.OpenAI(
            base_url=f"{target.scheme}://{target.host_header}{base_path}", api_key=api_key or "EMPTY",
            max_retries=0, timeout=openai.Timeout(timeout, connect=connect_timeout),
        )

    def connect(self) -> None:
        """Open a pooled connection ahead of the first request (the SDK connects lazily)."""
        try:
            self.client.with_options(timeout=5.0).models.list()
        except self._openai.OpenAIError:
            pass  # servers without /v1/models: the first request connects instead

    def close(self) -> None:
        self.client.close()

    def stream(self, body: bytes | dict[str, Any], meta: R.RequestMeta, want_text: bool = False,
               headers: dict[str, str] | None = None,
               on_cancel: Callable[[R.RequestRecord], None] | None = None) -> R.RequestRecord:
        """Same contract as :meth:`FastTransport.stream`."""
        openai = self._openai
        fields = json.loads(body) if isinstance(body, bytes | bytearray) else dict(body)
        fields.pop("stream", None)
        std = {k: v for k, v in fields.items() if k in self._STANDARD_KEYS}
        extra_body = {k: v for k, v in fields.items() if k not in self._STANDARD_KEYS}
        hdrs = {"X-Request-Id": meta.request_id, **(headers or {})}
        api = self.client.chat.completions if self.chat else self.client.completions
        meta.start_time = time.time()
        t0 = perf_counter()
        acc = R.StreamAccumulator(t0, want_text)
        try:
            stream = api.create(stream=True, extra_headers=hdrs, extra_body=extra_body or None, **std)
        except openai.APIError as e:
            return self._failed(meta, e, t0)
        except BaseException:
            if on_cancel is not None:
                on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=None))
            raise
        state, detail = "complete", ""
        interpret = _interpret_sdk_chunk
        try:
            for chunk in stream:
                now = perf_counter()
                acc.add(interpret(chunk), now)
        except openai.APITimeoutError:
            state, detail = "timeout", "no progress within the request timeout"
        except openai.APIError as e:  # an error object inside the stream, or a broken connection
            if isinstance(e, openai.APIConnectionError):
                state, detail = "eof", f"connection closed mid-stream: {e.__cause__ or e}"[:300]
            else:
                acc.error = str(e.message)[:500]
        except ValueError as e:  # malformed JSON in an event
            acc.bad = f"invalid JSON in SSE data: {e}"[:200]
        except Exception as e:  # the SDK's HTTP layer raising past its own wrappers
            state, detail = "eof", f"connection closed mid-stream: {e.__class__.__name__}: {e}"[:300]
        except BaseException:
            if on_cancel is not None:
                on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=stream.response.status_code))
            raise
        finally:
            stream.close()
        t_end = perf_counter()
        if state == "complete" and acc.finish_reason is not None:
            acc.done = True  # the SDK consumed the [DONE] that ended the loop
            acc.last_event = t_end
        return acc.finish(meta, state, t_end, http_status=stream.response.status_code, detail=detail)

    def _failed(self, meta: R.RequestMeta, e: Exception, t0: float) -> R.RequestRecord:
        openai = self._openai
        e2e = (perf_counter() - t0) * 1000.0
        if isinstance(e, openai.APIStatusError):
            return R.failed_record(meta, R.status_for_http(e.status_code), error_message(e.response.content),
                                   http_status=e.status_code, e2e_ms=e2e,
                                   retry_after=e.response.headers.get("retry-after", ""))
        if isinstance(e, openai.APITimeoutError):
            return R.failed_record(meta, R.TIMEOUT, "no response within the request timeout", e2e_ms=e2e)
        return R.failed_record(meta, R.CONNECT_ERROR, f"{e}: {e.__cause__}"[:300], e2e_ms=e2e)


def _interpret_sdk_chunk(chunk: Any) -> Any:
    return interpret(chunk.to_dict() if hasattr(chunk, "to_dict") else chunk.model_dump())
