"""Agent tasks: each task is a loop of model calls. Pure (given an RNG); the user does the sending,
the tool latency sleeps and the task accounting (:mod:`llmload.metrics.agent_tasks`).

A task starts with the user's task message (step kind ``task``) and the tool definitions. When a
reply carries ``tool_calls``, the history gets that assistant message and one ``tool`` message
per call (``tool_result_tokens`` words each), and the next call follows after the tool latency
(step kind ``tool_result``). The task ends when a reply has no tool call, after ``max_steps``
calls, or at a failed call.

``input_tokens`` of each request counts words the way ``llmload mock`` counts prompt tokens:
every tool definition as the words of its JSON, then every message's text, and for an assistant
message its tool calls' names and arguments (:func:`prompt_words`).

Usage::

    agent = AgentWorkload(spec, user_seed=5, model="m", text=TextSource(1))
    req = agent.start_task()
    req = agent.next_call(req, ok=True, text="", tool_calls=[{"id": "c1", "type": "function",
                          "function": {"name": "search_docs", "arguments": "{}"}}])   # None: task over
"""

from __future__ import annotations

import json
import random
from typing import Any

from llmload.workload.request import LLMRequest
from llmload.workload.text import TextSource, words

TOOL_NAMES = ("search_docs", "read_file", "run_sql", "http_get", "list_tickets", "get_weather", "send_email",
              "calculator", "lookup_customer", "create_ticket", "write_file", "run_tests")
TOOL_DESCRIPTION_WORDS = 30


def synthetic_tools(n: int, seed: int = 0) -> tuple[dict[str, Any], ...]:
    """``n`` function tools with fixed names, a ~30-word description and two parameters (the same
    definitions in every process, so they are a shared, cacheable start of every prompt)."""
    out = []
    for i in range(n):
        name = TOOL_NAMES[i % len(TOOL_NAMES)] + (f"_{i // len(TOOL_NAMES)}" if i >= len(TOOL_NAMES) else "")
        r = random.Random(seed * 7919 + i)
        out.append({"type": "function", "function": {
            "name": name,
            "description": words(r, TOOL_DESCRIPTION_WORDS),
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": words(r, 8)},
                "limit": {"type": "integer", "description": words(r, 4)}},
                "required": ["query"]},
        }})
    return tuple(out)


def content_words(content: Any) -> int:
    """Words of a message's content: a string, or the text parts of a list (images are not words)."""
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(len(p["text"].split()) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def message_words(m: dict[str, Any]) -> int:
    n = content_words(m.get("content"))
    for call in m.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(str(fn.get("name", "")).split()) + len(str(fn.get("arguments", "")).split())
    return n


def prompt_words(messages: list[dict[str, Any]], tools: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()) -> int:
    """Prompt length as `llmload mock` counts it (see the module docstring)."""
    return sum(len(json.dumps(t).split()) for t in tools) + sum(message_words(m) for m in messages)


class AgentWorkload:
    """One user's agent tasks for one workload (``spec.agent`` set)."""

    def __init__(self, spec: Any, user_seed: int, model: str, text: TextSource, system: str | None = None,
                 images: Any = None, input_tokens: Any = None, output_tokens: Any = None,
                 ignore_eos: bool | None = None) -> None:
        assert spec.agent is not None
        self.spec = spec
        self.agent = spec.agent
        self.model = model
        self.text = text
        self.rng = random.Random(user_seed)
        self.system = system if system is not None else spec.system_prompt
        self.images = images
        self.input_tokens = input_tokens or spec.input_tokens
        self.output_tokens = output_tokens or spec.output_tokens
        self.ignore_eos = spec.ignore_eos if ignore_eos is None else ignore_eos
        self._tag = f"a{user_seed:x}"
        self._tasks = 0
        self._messages: list[dict[str, Any]] = []
        self._step = 0
        self._task_id = ""
        self._image_tokens: int | None = None
        self._tool_words = prompt_words([], self.agent.tools)  # the same for every call
        self._words = 0  # of the messages so far

    @property
    def tools(self) -> tuple[dict[str, Any], ...]:
        return self.agent.tools

    def start_task(self) -> LLMRequest:
        """The first call of a new task; ``wait_s`` is the think time before it."""
        self._tasks += 1
        self._task_id = f"{self._tag}-{self._tasks}"
        self._step = 0
        n_user = max(1, int(self.input_tokens.sample(self.rng)))
        task = self.text.text(self.rng, n_user, tag=f"{self._tag}t{self._tasks}")
        self._messages = [{"role": "system", "content": self.system}] if self.system else []
        self._image_tokens = None
        if self.images is not None:
            self._messages.append({"role": "user", "content": self.images.content(task, self.rng)})
            self._image_tokens = self.images.tokens
        else:
            self._messages.append({"role": "user", "content": task})
        self._words = sum(message_words(m) for m in self._messages)
        think = float(self.agent.think_time_s.sample(self.rng)) if self._tasks > 1 else 0.0
        # every call resends the tools and the system prompt (the same for every task)
        system_words = message_words(self._messages[0]) if self.system else 0
        return self._call("task", think, self._tool_words + system_words)

    def next_call(self, request: LLMRequest, ok: bool, text: str,
                  tool_calls: list[dict[str, Any]]) -> LLMRequest | None:
        """The call after ``request``'s reply, or None when the task is over. ``wait_s`` of the
        returned request is the tool latency to sleep before sending it."""
        if request.session_id != self._task_id or not ok or not tool_calls or self._step >= self.agent.max_steps:
            return None
        calls = [{"id": str(c.get("id") or f"call_{self._step}_{i}"), "type": "function",
                  "function": {"name": str((c.get("function") or {}).get("name", "")),
                               "arguments": str((c.get("function") or {}).get("arguments", ""))}}
                 for i, c in enumerate(tool_calls)]
        reply = {"role": "assistant", "content": text or None, "tool_calls": calls}
        self._messages.append(reply)
        self._words += message_words(reply)
        resent = self._tool_words + self._words  # the loop so far, the reply included: only the results are new
        for i, c in enumerate(calls):
            n = max(1, int(self.agent.tool_result_tokens.sample(self.rng)))
            result = self.text.text(self.rng, n, tag=f"{self._tag}t{self._tasks}s{self._step}r{i}")
            self._messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
            self._words += len(result.split())
        latency = float(self.agent.tool_latency_s.sample(self.rng))
        return self._call("tool_result", latency, resent)

    def _call(self, kind: str, wait_s: float, resent: int) -> LLMRequest:
        self._step += 1
        spec = self.spec
        max_tokens = int(self.output_tokens.sample(self.rng)) if self.output_tokens is not None else None
        req = LLMRequest(scenario=spec.name, max_tokens=max_tokens, model=self.model,
                         messages=list(self._messages), sampling=dict(spec.sampling), extra=dict(spec.extra),
                         session_id=self._task_id, turn=self._step, want_text=True,
                         input_tokens=self._tool_words + self._words, wait_s=wait_s, step_kind=kind,
                         image_tokens=self._image_tokens, resent_tokens=resent)
        req.extra["tools"] = list(self.tools)
        req.extra["tool_choice"] = self.agent.tool_choice
        if spec.response_format is not None:
            req.extra["response_format"] = spec.response_format
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        return req

    # The Workload interface, for code that treats every source alike; the task loop uses the above.
    def next_request(self) -> LLMRequest:
        return self.start_task()

    def on_reply(self, request: LLMRequest, text: str, ok: bool) -> None:
        pass
