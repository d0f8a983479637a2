"""LoRA adapters in the mock, as vLLM serves them: a base model and named adapters, of which at
most ``max_loras`` are loaded at once (``--max-loras``, vLLM's ``max_loras``, default 1).

A request for an adapter that is not loaded waits for a free slot, or for a loaded adapter to be
idle (no request running on it; the least recently used idle one is evicted), then pays the load
cost (``--lora-load-ms``) before the engine sees it; requests for an adapter being loaded wait for
that load. As in vLLM, where such a request sits in the scheduler's waiting queue, the wait is queue
time: :func:`wait_for_adapter` gives the engine the moment the request would have entered its queue
(so the engine's queue time, TTFT and E2E include the wait), and while it waits the request counts
among the engine's waiting ones (``engine.held``: ``vllm:num_requests_waiting``, ``--max-queue``).

The base model needs no slot. ``/v1/models`` lists the base model and the adapters as vLLM's
``OpenAIServingModels.show_available_models`` does (an adapter's card has ``parent``, the base
model, and ``root``); a model the mock does not serve gets vLLM's 404 (``The model `X` does
not exist.``, ``NotFoundError``). ``/metrics`` shows vLLM's ``vllm:lora_requests_info`` gauge
(vllm/v1/metrics/loggers.py: labels ``max_lora``, ``waiting_lora_adapters``,
``running_lora_adapters``, the adapters' names comma-joined; its value the time it was set).

Usage::

    slots = LoraSlots(LoraConfig(("adapter-1", "adapter-2"), max_loras=1, load_ms=200), "base")
    adapter = slots.acquire("adapter-1")     # blocks this greenlet until loaded; None for the base
    ...                                      # the request runs
    slots.release(adapter)
    adapter, queued_at = wait_for_adapter(slots, "adapter-1", 0, engine)   # the server's call
    seq = engine.submit(engine_request, queued_at)
"""

from __future__ import annotations

import argparse
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event

from llmload.argtypes import number
from llmload.mock.api import openai_api as api

DEFAULT_MAX_LORAS = 1  # vLLM's default
DEFAULT_LOAD_MS = 25.0


@dataclass(frozen=True)
class LoraConfig:
    adapters: tuple[str, ...]
    max_loras: int = DEFAULT_MAX_LORAS
    load_ms: float = DEFAULT_LOAD_MS


def parse_adapters(text: str) -> tuple[str, ...]:
    """``--lora-adapters``: a count N (``adapter-1`` ... ``adapter-N``, the names ``models: {zipf: ...}``
    draws by default) or a comma-separated list of names."""
    text = str(text).strip()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= 10_000:
            raise argparse.ArgumentTypeError(f"{text}: expected 1 to 10000 adapters, or a list of names")
        return tuple(f"adapter-{i}" for i in range(1, n + 1))
    names = tuple(n.strip() for n in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a count or comma-separated distinct names (a,b,c)")
    return names


def add_lora_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LoRA adapters (vLLM's --lora-modules and --max-loras)")
    g.add_argument("--lora-adapters", type=parse_adapters, default=None, metavar="ADAPTERS",
                   help="serve these adapters beside the base model: a count N (adapter-1 ... adapter-N) or names; "
                        "a request for any other model gets vLLM's 404 (default: none, every model name accepted)")
    g.add_argument("--max-loras", type=number(at_least=1, integer=True), default=DEFAULT_MAX_LORAS, metavar="K",
                   help=f"adapters loaded at once; a request for another waits for a slot (LRU eviction of an idle "
                        f"adapter) (default {DEFAULT_MAX_LORAS}, vLLM's)")
    g.add_argument("--lora-load-ms", type=number(at_least=0, noun="milliseconds"), default=DEFAULT_LOAD_MS,
                   metavar="MS", help=f"what loading an adapter into a slot costs (default {DEFAULT_LOAD_MS:g})")


def lora_config(args: argparse.Namespace) -> LoraConfig | None:
    adapters = getattr(args, "lora_adapters", None)
    if not adapters:
        return None
    return LoraConfig(adapters, int(getattr(args, "max_loras", DEFAULT_MAX_LORAS)),
                      float(getattr(args, "lora_load_ms", DEFAULT_LOAD_MS)))


class LoraSlots:
    """The adapters' slots of one mock server (its greenlets share it; gevent: no locks needed)."""

    def __init__(self, config: LoraConfig, base_model: str) -> None:
        self.config = config
        self.base = base_model
        self._adapters = set(config.adapters)
        self.loaded: OrderedDict[str, int] = OrderedDict()  # adapter → running requests, least recent first
        self.loading: dict[str, gevent.event.Event] = {}  # adapters being loaded, set when done
        self.waiting: dict[str, int] = {}  # adapter → requests waiting for it
        self.loads = 0  # adapters loaded so far (evictions = loads beyond the slots)
        self._changed = gevent.event.Event()

    def serves(self, model: str) -> bool:
        return model == self.base or model in self._adapters

    def not_found_body(self, model: str) -> bytes:
        return api.error_body(404, f"The model `{model}` does not exist.")

    def acquire(self, model: str, held: list[int] | None = None, priority: int = 0) -> str | None:
        """Wait until ``model``'s adapter is loaded and count a request running on it; None: the base.
        ``held``: a list the request's ``priority`` is in while it waits (the engine's ``held``)."""
        if model not in self._adapters:
            return None
        self.waiting[model] = self.waiting.get(model, 0) + 1
        if held is not None:
            held.append(priority)
        try:
            while True:
                if model in self.loading:
                    self.loading[model].wait()
                    continue
                if model in self.loaded:
                    self.loaded[model] += 1
                    self.loaded.move_to_end(model)
                    return model
                if len(self.loaded) >= self.config.max_loras and not self._evict_idle():
                    changed = self._changed  # taken before waiting: a release swaps in a new one
                    changed.wait()
                    continue
                self._load(model)
        finally:
            if held is not None:
                held.remove(priority)
            self.waiting[model] -= 1
            if not self.waiting[model]:
                del self.waiting[model]

    def release(self, adapter: str | None) -> None:
        """A request on ``adapter`` ended (None: the base model's: nothing to do)."""
        if adapter is None or adapter not in self.loaded:
            return
        self.loaded[adapter] -= 1
        if not self.loaded[adapter]:
            self._notify()

    def _evict_idle(self) -> bool:
        for name, running in self.loaded.items():  # least recently used first
            if not running and name not in self.loading:
                del self.loaded[name]
                return True
        return False

    def _load(self, model: str) -> None:
        self.loaded[model] = 0  # holds its slot while it loads
        done = self.loading[model] = gevent.event.Event()
        self.loads += 1
        try:
            if self.config.load_ms > 0:
                gevent.sleep(self.config.load_ms / 1000.0)
        finally:
            del self.loading[model]
            done.set()
            self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, gevent.event.Event()
        changed.set()

    def running(self) -> list[str]:
        """The adapters with a request running, by name."""
        return sorted(name for name, n in self.loaded.items() if n > 0)

    def models_body(self, max_model_len: int) -> bytes:
        """``/v1/models``: the base model's card, then each adapter's (vLLM's ModelCard fields)."""
        cards = [{"id": self.base, "object": "model", "created": 0, "owned_by": "llmload-mock", "root": self.base,
                  "parent": None, "max_model_len": max_model_len}]
        cards += [{"id": name, "object": "model", "created": 0, "owned_by": "llmload-mock", "root": name,
                   "parent": self.base, "max_model_len": None} for name in self.config.adapters]
        return json.dumps({"object": "list", "data": cards}).encode()

    def metrics_text(self, now: float | None = None) -> str:
        """vLLM's ``vllm:lora_requests_info`` gauge (its label order; the value the time it was set)."""
        waiting = ",".join(sorted(self.waiting))
        running = ",".join(self.running())
        value = time.time() if now is None else now
        return ("# HELP vllm:lora_requests_info Running stats on lora requests.\n"
                "# TYPE vllm:lora_requests_info gauge\n"
                f'vllm:lora_requests_info{{max_lora="{self.config.max_loras}",waiting_lora_adapters="{waiting}",'
                f'running_lora_adapters="{running}"}} {value!r}\n')


def wait_for_adapter(slots: LoraSlots | None, model: str, priority: int, engine: Any) -> tuple[str | None, float]:
    """The request's adapter (None: the base model, or no adapters served), once its slot is loaded, and
    the moment it would have entered the engine's queue without waiting (perf_counter): its engine
    arrival, so the wait is queue time. While it waits its priority is in ``engine.held``."""
    queued_at = time.perf_counter()
    if slots is None:
        return None, queued_at
    return slots.acquire(model, engine.held, priority), queued_at
