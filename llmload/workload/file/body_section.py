"""The keys of a workload that sends whole-body requests (``endpoint: embeddings|rerank|score``) or
chains them into RAG tasks (``pipeline: [embed, rerank, chat]``), and which other keys go with them.

* ``endpoint: embeddings``: ``batch_size`` (inputs per request), ``input_tokens`` (each input's
  length; default 128), ``encoding_format`` (float|base64), ``dimensions``.
* ``endpoint: rerank`` / ``score``: ``documents`` (passages per query), ``query_tokens``,
  ``document_tokens``, ``top_n`` (rerank only).
* ``pipeline:`` (a chat workload): the steps, in order, ending with chat; ``documents``,
  ``query_tokens``, ``document_tokens`` (the retrieved passages), ``top_n`` (how many of them the
  chat prompt gets, default 4), ``encoding_format`` and ``dimensions`` for the embed call, and the
  chat keys ``output_tokens``, ``system_prompt``, ``sampling``, ``extra``, ``ignore_eos``.

A key that does not go with the workload's kind is one error naming it and the keys that do (a
key from ``defaults:`` is not: the defaults apply where they fit, :func:`fitting_defaults`). A
pipeline's ``priority:`` class is in each of its rows; its value goes in the chat call.

Usage::

    body, pipeline = parse_body(ctx, merged, raw, "workloads.embed", "embeddings", distribution)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmload.wire.protocol import BODY_ENDPOINTS
from llmload.workload.distributions import Distribution, parse_distribution
from llmload.workload.file.spec import BodySpec, PipelineSpec
from llmload.workload.file.yaml_lines import MAX_TOKENS, Ctx, choice, keys, whole

BODY_KEYS = {"batch_size", "encoding_format", "dimensions", "documents", "query_tokens", "document_tokens", "top_n",
             "pipeline"}
STEPS = ("embed", "rerank", "chat")
MAX_TEXTS = 100_000  # inputs or passages in one request (OpenAI takes 2,048 inputs; an answer is at most 64 MiB)
PIPELINE_KEYS = {"steps", "embed_model", "rerank_model", "rerank_api"}
_COMMON = {"weight", "endpoint", "model", "slo", "headers"}
_RANK = {"documents", "query_tokens", "document_tokens"}
ALLOWED = {
    "embeddings": _COMMON | {"batch_size", "input_tokens", "encoding_format", "dimensions"},
    "rerank": _COMMON | _RANK | {"top_n"},
    "score": _COMMON | _RANK,
    "pipeline": _COMMON | _RANK | {"pipeline", "top_n", "encoding_format", "dimensions", "output_tokens",
                                   "system_prompt", "sampling", "extra", "ignore_eos", "priority"},
}
DistributionOf = Callable[..., Distribution | None]  # sections_core.distribution(ctx, d, key, path, minimum=...)


def _why(key: str, kind: str) -> str:
    """Why ``models:`` or ``priority:`` does not go with a whole-body workload (or ``models:`` with a pipeline)."""
    if key == "models":
        one = "model: (and embed_model, rerank_model in pipeline:)" if kind == "pipeline" else "model:"
        return f"a mix of models goes with streaming workloads; this one sends one model, {one}; "
    if key == "priority":
        return "whole-body requests carry no priority class (a pipeline's calls do: give it there); "
    return ""


def _kind_keys(ctx: Ctx, raw: dict, path: str, kind: str) -> None:
    allowed = ALLOWED[kind]
    for key in raw:
        if key not in allowed:
            what = f"endpoint {kind}" if kind != "pipeline" else "a pipeline"
            why = _why(key, kind)
            raise ctx.error(f"{path}.{key}", f"does not go with {what}: {why}its keys are "
                            f"{', '.join(sorted(allowed - _COMMON))} (and {', '.join(sorted(_COMMON))})")


def body_kind(d: dict, endpoint: str) -> str | None:
    """embeddings, rerank or score (a whole-body workload), pipeline, or None (a streaming workload)."""
    return endpoint if endpoint in BODY_ENDPOINTS else "pipeline" if "pipeline" in d else None


def fitting_defaults(defaults: dict, raw: dict, endpoint: str) -> dict:
    """The workload with the keys of ``defaults:`` that go with its kind (``models:`` and ``priority:``
    of the defaults stay with the streaming workloads; a pipeline takes ``priority:``)."""
    d = {**defaults, **raw}
    kind = body_kind(d, endpoint)
    return d if kind is None else {k: v for k, v in defaults.items() if k in ALLOWED[kind]} | raw


def _pipeline(ctx: Ctx, raw: Any, path: str) -> PipelineSpec:
    p = {"steps": raw} if isinstance(raw, list) else keys(ctx, raw, path, PIPELINE_KEYS)
    steps = p.get("steps")
    order = [STEPS.index(s) if isinstance(s, str) and s in STEPS else -1 for s in steps] \
        if isinstance(steps, list) else []
    if not order or -1 in order or order != sorted(set(order)) or steps[-1] != "chat":
        raise ctx.error(f"{path}.steps" if isinstance(raw, dict) else path,
                        f"expected steps in the order embed, rerank, chat, ending with chat ([embed, rerank, chat], "
                        f"[rerank, chat], [embed, chat]), got {steps!r}")
    for key in ("embed_model", "rerank_model"):
        if key in p and not isinstance(p[key], str):
            raise ctx.error(f"{path}.{key}", f"expected text, got {p[key]!r}")
    return PipelineSpec(steps=tuple(steps), embed_model=p.get("embed_model"), rerank_model=p.get("rerank_model"),
                        rerank_api=choice(ctx, p, "rerank_api", path, ("rerank", "score"), "rerank"))


def check_texts(ctx: Ctx, got: Distribution, path: str) -> None:
    """The largest draw of ``batch_size`` or ``documents`` (not its mean: one draw builds that many texts)."""
    top = got.top
    if top <= MAX_TEXTS:
        return
    if got.kind in ("normal", "lognormal") and got.hi >= MAX_TOKENS:  # no max: of its own (the lengths' cap)
        raise ctx.error(path, f"a {got.kind} draw has no upper bound: give max: (at most {MAX_TEXTS:,} texts "
                        "per request)")
    raise ctx.error(path, f"{top:g} is too large: expected at most {MAX_TEXTS:,} texts per request (its largest "
                    "draw, not its mean: lower max: or the largest value)")


def parse_body(ctx: Ctx, d: dict, raw: dict, path: str, endpoint: str,
               distribution: DistributionOf) -> tuple[BodySpec | None, PipelineSpec | None]:
    """``d``: the workload with its defaults, ``raw``: as the file wrote it (whose keys are checked)."""
    kind = body_kind(d, endpoint)
    if kind is None:
        for key in raw:
            if key in BODY_KEYS:
                raise ctx.error(f"{path}.{key}", f"goes only with endpoint embeddings, rerank or score, or a "
                                f"pipeline; this workload streams {endpoint}")
        return None, None
    if kind == "pipeline" and endpoint != "chat":
        raise ctx.error(f"{path}.pipeline", f"a pipeline ends with a chat call: endpoint chat, not {endpoint}")
    _kind_keys(ctx, raw, path, kind)
    pipeline = _pipeline(ctx, d["pipeline"], f"{path}.pipeline") if kind == "pipeline" else None

    def dist(key: str, default: Any) -> Distribution | None:
        got = distribution(ctx, d, key, path, minimum=1) if key in ALLOWED[kind] else None
        if got is not None and key in ("batch_size", "documents"):  # texts per request, each built ahead
            check_texts(ctx, got, f"{path}.{key}")
        return got if got is not None else parse_distribution(default, key, minimum=1) if default else None

    return BodySpec(
        batch_size=dist("batch_size", 8 if kind == "embeddings" else None),
        input_tokens=dist("input_tokens", 128 if kind == "embeddings" else None),
        encoding_format=choice(ctx, d, "encoding_format", path, ("float", "base64"), "float"),
        dimensions=whole(ctx, d, "dimensions", path, default=None),
        documents=dist("documents", 16 if kind != "embeddings" else None),
        query_tokens=dist("query_tokens", 16 if kind != "embeddings" else None),
        document_tokens=dist("document_tokens", 128 if kind != "embeddings" else None),
        top_n=whole(ctx, d, "top_n", path, default=4 if kind == "pipeline" else None),
    ), pipeline
