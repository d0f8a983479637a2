"""What a scenario file says, as plain frozen types (the parsers in :mod:`.sections` build them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmload.metrics.slo import SLO
from llmload.workload.distributions import Distribution
from llmload.workload.model_mix import ModelMix
from llmload.workload.tasks.call_graph import GraphSpec


class ScenarioError(ValueError):
    """``file:line: key.path: what was expected``."""


@dataclass(frozen=True)
class PrefixGroup:
    name: str
    tokens: int
    count: int
    popularity: str  # "uniform" | "zipf"
    zipf_s: float
    weight: float


@dataclass(frozen=True)
class SessionSpec:
    turns: Distribution
    think_time_s: Distribution


@dataclass(frozen=True)
class DatasetSpec:
    path: str  # absolute
    format: str  # "sharegpt" | "jsonl"
    min_input_tokens: int
    max_input_tokens: int | None
    turns: str  # "all" | "first"
    limit: int | None


@dataclass(frozen=True)
class ArrivalSpec:
    mode: str  # "closed" | "open"
    rate: float = 0.0  # requests/s over the whole run (split over worker processes)
    burstiness: float = 1.0  # gamma shape of the gaps; 1 = Poisson, < 1 burstier
    max_in_flight: int | None = None


@dataclass(frozen=True)
class TraceSpec:
    """``trace:``: replay a production trace's arrivals and lengths (see :mod:`.trace`)."""

    path: str  # absolute
    format: str | None = None  # None: told from the file's first line
    time_scale: float = 1.0  # trace seconds x time_scale = replay seconds (0.5: twice as fast)
    start: float = 0.0  # trace seconds skipped
    duration: float | None = None  # trace seconds replayed from start
    limit: int | None = None  # at most this many requests of the window
    loop: int = 1  # play the window this many times end to end
    models: tuple[str, ...] = ()  # BurstGPT: keep rows of these models
    log_types: tuple[str, ...] = ()  # BurstGPT: keep rows of these log types
    block_tokens: int = 512  # tokens per hash id (Mooncake's block) and per shared prefix_id
    affinity_header: str = ""  # agentic traces: the session id in this header on every call (x-session-id)


@dataclass(frozen=True)
class ImagesSpec:
    """``images:``: generated pictures sent as data-URL content parts with every user message."""

    count: int = 1
    width: int = 512
    height: int = 512
    format: str = "png"  # or jpeg
    distinct: int = 8  # how many different pictures the workload cycles through (per size)


@dataclass(frozen=True)
class AgentSpec:
    """``session: {kind: agent}``: each task is a loop of model calls answered by tool results."""

    max_steps: int
    tools: tuple[dict[str, Any], ...]  # OpenAI tool definitions sent with every call
    tool_choice: Any  # "auto", "required", "none" or {"type": "function", "function": {"name": ...}}
    tool_result_tokens: Distribution  # size of each tool message
    tool_latency_s: Distribution  # time the tool takes before the next call
    think_time_s: Distribution  # pause between tasks


BODY_PRIORITY_FIELD = "priority"  # vLLM's ChatCompletionRequest/CompletionRequest field


@dataclass(frozen=True)
class PrioritySpec:
    """A workload's priority class: its name, the value sent, and where (None header: the body)."""

    name: str
    value: int | str | None = None
    header: str | None = None
    rank: float = 0.0

    def body_fields(self) -> dict[str, Any]:
        """What goes into the request body (``{"priority": 0}``), {} when it is sent as a header."""
        return {BODY_PRIORITY_FIELD: self.value} if self.header is None and self.value is not None else {}

    def header_pairs(self) -> tuple[tuple[str, str], ...]:
        """The request header that carries the class, () when it goes in the body."""
        return ((self.header, str(self.value)),) if self.header is not None and self.value is not None else ()


@dataclass(frozen=True)
class BodySpec:
    """``endpoint: embeddings|rerank|score``: what each whole-body request holds (:mod:`.body_section`)."""

    batch_size: Distribution | None = None  # embeddings: inputs per request
    input_tokens: Distribution | None = None  # embeddings: each input's length
    encoding_format: str = "float"  # embeddings: float or base64
    dimensions: int | None = None  # embeddings: the vectors' length to ask for
    documents: Distribution | None = None  # rerank, score (and a pipeline's rerank): passages per query
    query_tokens: Distribution | None = None
    document_tokens: Distribution | None = None
    top_n: int | None = None  # rerank: results asked for; a pipeline: the passages put into the chat prompt
    options: tuple[tuple[str, Any], ...] = ()  # an endpoint's own keys that are not fields here, as (key, value)

    def option(self, key: str, default: Any = None) -> Any:
        """The value of an endpoint's own key (``options``), or ``default``."""
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class PipelineSpec:
    """``pipeline: [embed, rerank, chat]``: one task per query, its calls in this order (a RAG request)."""

    steps: tuple[str, ...]  # a subsequence of ("embed", "rerank", "chat") that ends with chat
    embed_model: str | None = None  # None: the workload's model
    rerank_model: str | None = None
    rerank_api: str = "rerank"  # or "score" (vLLM's /v1/score)


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    weight: float = 1.0
    endpoint: str = "chat"
    model: str | None = None
    system_prompt: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    ignore_eos: bool = False
    input_tokens: Distribution | None = None
    output_tokens: Distribution | None = None
    prefix_groups: tuple[PrefixGroup, ...] = ()
    intended_hit_rate: float | None = None  # prefix_hit_rate: the share of prompt tokens meant to be a cache hit
    prefix_prime: bool = False  # prefix: {prime: true}: each process sends every prefix once before drawing
    max_concurrent: int | None = None
    session: SessionSpec | None = None
    dataset: DatasetSpec | None = None
    arrival: ArrivalSpec = ArrivalSpec("closed")
    slos: tuple[SLO, ...] = ()  # scoped to this workload
    headers: tuple[tuple[str, str], ...] = ()  # extra request headers (env:VAR values already read)
    header_secrets: tuple[str, ...] = ()  # their values never to be written: env:VAR ones, and secret names'
    trace: TraceSpec | None = None
    images: ImagesSpec | None = None
    agent: AgentSpec | None = None
    graph: GraphSpec | None = None  # session: {kind: graph}: call-graph sessions
    response_format: dict[str, Any] | None = None  # passed through to the request body
    models: ModelMix | None = None  # models: a mix of models or LoRA adapters, drawn per request or session
    priority: PrioritySpec | None = None  # priority: the class of its requests (its value already in extra/headers)
    body: BodySpec | None = None  # endpoint embeddings, rerank or score, and a pipeline's embed and rerank calls
    pipeline: PipelineSpec | None = None  # pipeline: embed -> rerank -> chat tasks

    def expected_prefix_hit_ratio(self) -> float | None:
        """Share of prompt tokens a warm prefix cache can serve: whole 16-token blocks of the
        shared prefix ÷ prefix + mean unique part. An upper bound (first uses and evictions miss)."""
        if self.intended_hit_rate is not None:
            return self.intended_hit_rate
        if not self.prefix_groups:
            return None
        unique = self.input_tokens.mean if self.input_tokens is not None else 256.0
        total_w = sum(g.weight for g in self.prefix_groups)
        ratio = 0.0
        for g in self.prefix_groups:
            cacheable = (g.tokens // 16) * 16
            ratio += g.weight / total_w * cacheable / (g.tokens + unique)
        return ratio


@dataclass(frozen=True)
class ScenarioSpec:
    path: str
    seed: int | None  # the file's seed: (pins its workloads' requests, unless --seed is given); None: none
    workloads: tuple[WorkloadSpec, ...]
    tokenizer: str | None = None
    shape: dict[str, Any] = field(default_factory=dict)  # load-shape settings (llmload.shapes.load_shapes reads them)

    def workload(self, name: str) -> WorkloadSpec:
        for w in self.workloads:
            if w.name == name:
                return w
        raise ScenarioError(f"{self.path}: no workload {name!r}; it has {', '.join(w.name for w in self.workloads)}")
