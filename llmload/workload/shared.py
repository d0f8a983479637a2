"""What the users of one process share: text corpus, prefix texts, datasets, caps, arrival gates.

Built lazily on first use (never at import: Locust forks --processes after importing the
locustfile), and one per Locust process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent.lock

from llmload.workload.arrival import ArrivalGate
from llmload.workload.dataset import Conversation, load_dataset
from llmload.workload.file.spec import ArrivalSpec, ScenarioSpec, WorkloadSpec
from llmload.workload.scenario_workload import PrefixPool
from llmload.workload.text import TextSource, TokenizedTextSource


class SharedState:
    def __init__(self, processes: Callable[[], int], rate_override: Callable[[], float | None]) -> None:
        self._processes = processes  # how many worker processes share an open-loop rate
        self._rate_override = rate_override  # the arrival-rate ladder's current rate, if one runs
        self._text: dict[tuple[int, str | None], TextSource] = {}
        self._prefixes: dict[tuple[str, str, int], PrefixPool] = {}
        self._datasets: dict[str, list[Conversation]] = {}
        self._semaphores: dict[Any, gevent.lock.Semaphore] = {}
        self._built: dict[Any, Any] = {}
        self._built_seed: int | None = None  # the run seed of what _built holds
        self.gates: dict[str, ArrivalGate] = {}

    def text_source(self, seed: int, tokenizer: str | None) -> TextSource:
        key = (seed, tokenizer)
        src = self._text.get(key)
        if src is None:
            src = self._text[key] = TokenizedTextSource(seed, tokenizer) if tokenizer else TextSource(seed)
        return src

    def prefix_pool(self, scenario: ScenarioSpec, spec: WorkloadSpec) -> PrefixPool | None:
        if not spec.prefix_groups:
            return None
        key = (scenario.path, spec.name, scenario.seed)  # a new run seed: new prefixes
        pool = self._prefixes.get(key)
        if pool is None:
            pool = self._prefixes[key] = PrefixPool(spec.prefix_groups, scenario.seed, spec.name, spec.prefix_prime)
        return pool

    def conversations(self, spec: WorkloadSpec) -> list[Conversation]:
        assert spec.dataset is not None
        key = f"{spec.dataset.path}|{spec.dataset.turns}|{spec.dataset.min_input_tokens}|" \
              f"{spec.dataset.max_input_tokens}|{spec.dataset.limit}"
        convs = self._datasets.get(key)
        if convs is None:
            convs = self._datasets[key] = load_dataset(spec.dataset)
        return convs

    def cached(self, key: Any, build: Callable[[], Any], seed: int) -> Any:
        """``build()``, once per process, ``key`` and run ``seed`` (an embeddings workload's batches built
        ahead). A new seed (the web UI's next test) drops what the last one built: it is never used again."""
        if seed != self._built_seed:
            self._built.clear()
            self._built_seed = seed
        key = (key, seed)
        value = self._built.get(key)
        if value is None:
            value = self._built[key] = build()
        return value

    def semaphore(self, key: Any, limit: int) -> gevent.lock.Semaphore:
        sem = self._semaphores.get(key)
        if sem is None:
            sem = self._semaphores[key] = gevent.lock.Semaphore(limit)
        return sem

    def gate(self, name: str, arrival: ArrivalSpec, seed: int) -> ArrivalGate:
        g = self.gates.get(name)
        if g is None:
            def rate() -> float:
                ladder = self._rate_override()
                return (arrival.rate if ladder is None else ladder) / max(1, self._processes())

            g = self.gates[name] = ArrivalGate(rate, arrival.burstiness, seed)
        return g

    def stop(self) -> None:
        for g in self.gates.values():
            g.stop()
        self.gates.clear()
