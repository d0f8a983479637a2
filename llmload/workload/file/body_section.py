"""The keys of a workload that sends whole-body requests (``endpoint: embeddings|rerank|score|...``) or
chains them into RAG tasks (``pipeline: [embed, rerank, chat]``), and which other keys go with them.

* ``endpoint: NAME`` of a whole-body endpoint: the keys its declaration names
  (:data:`llmload.wire.endpoints.ENDPOINTS`, ``keys``), each read as its :class:`~llmload.wire.endpoints.Key`
  says, with its default: embeddings ``batch_size`` (inputs per request), ``input_tokens`` (each
  input's length; default 128), ``encoding_format`` (float|base64), ``dimensions``; rerank and score
  ``documents`` (passages per query), ``query_tokens``, ``document_tokens``, ``top_n`` (rerank only).
  A key that is not a :class:`BodySpec` field is kept in its ``options``.
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
from dataclasses import fields
from typing import Any

from llmload.wire.endpoints import BODY, ENDPOINTS, Key, endpoint, known, names
from llmload.workload.distributions import Distribution, parse_distribution
from llmload.workload.file.spec import BodySpec, PipelineSpec
from llmload.workload.file.yaml_lines import MAX_TOKENS, Ctx, choice, keys, whole

STEPS = ("embed", "rerank", "chat")
MAX_TEXTS = 100_000  # inputs or passages in one request (OpenAI takes 2,048 inputs; an answer is at most 64 MiB)
PIPELINE_KEYS = {"steps", "embed_model", "rerank_model", "rerank_api"}
_COMMON = {"weight", "endpoint", "model", "slo", "headers"}
# A pipeline's keys: its retrieved passages (rerank's), how many the chat prompt gets, the embed call's
# vector options, and the chat call's keys.
PIPELINE = {**{k: endpoint("rerank").keys[k] for k in ("documents", "query_tokens", "document_tokens")},
            "top_n": Key("whole", 4), "encoding_format": endpoint("embeddings").keys["encoding_format"],
            "dimensions": Key("whole")}
_PIPELINE_ONLY = {"pipeline", "output_tokens", "system_prompt", "sampling", "extra", "ignore_eos", "priority"}
KEYS: dict[str, dict[str, Key]] = {e.name: dict(e.keys) for e in ENDPOINTS if e.answer == BODY} | {"pipeline": PIPELINE}
ALLOWED = {kind: _COMMON | set(k) for kind, k in KEYS.items()}
ALLOWED["pipeline"] |= _PIPELINE_ONLY
# The keys only whole-body workloads take (input_tokens is a streaming workload's too).
BODY_KEYS = {key for declared in KEYS.values() for key in declared} - {"input_tokens"} | {"pipeline"}
_FIELDS = {f.name for f in fields(BodySpec)}
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


def body_kind(d: dict, name: str) -> str | None:
    """A whole-body endpoint's name (embeddings, rerank, score, ...), pipeline, or None (a streaming workload)."""
    return name if known(name) and endpoint(name).answer == BODY else "pipeline" if "pipeline" in d else None


def fitting_defaults(defaults: dict, raw: dict, name: str) -> dict:
    """The workload with the keys of ``defaults:`` that go with its kind (``models:`` and ``priority:``
    of the defaults stay with the streaming workloads; a pipeline takes ``priority:``)."""
    d = {**defaults, **raw}
    kind = body_kind(d, name)
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


def _value(ctx: Ctx, d: dict, key: str, spec: Key, path: str, distribution: DistributionOf) -> Any:
    """One declared key's value, read as its :class:`Key` says (its default when the file has none)."""
    if spec.kind == "choice":
        return choice(ctx, d, key, path, spec.choices, spec.default)
    if spec.kind == "whole":
        return whole(ctx, d, key, path, default=spec.default)
    got = distribution(ctx, d, key, path, minimum=1)
    if got is not None and spec.kind == "texts":  # texts per request, each built ahead
        check_texts(ctx, got, f"{path}.{key}")
    return got if got is not None else parse_distribution(spec.default, key, minimum=1) if spec.default else None


def parse_body(ctx: Ctx, d: dict, raw: dict, path: str, name: str,
               distribution: DistributionOf) -> tuple[BodySpec | None, PipelineSpec | None]:
    """``d``: the workload with its defaults, ``raw``: as the file wrote it (whose keys are checked)."""
    kind = body_kind(d, name)
    if kind is None:
        for key in raw:
            if key in BODY_KEYS:
                *most, last = names(BODY)
                raise ctx.error(f"{path}.{key}", f"goes only with endpoint {', '.join(most)} or {last}, or a "
                                f"pipeline; this workload streams {name}")
        return None, None
    if kind == "pipeline" and name != "chat":
        raise ctx.error(f"{path}.pipeline", f"a pipeline ends with a chat call: endpoint chat, not {name}")
    _kind_keys(ctx, raw, path, kind)
    pipeline = _pipeline(ctx, d["pipeline"], f"{path}.pipeline") if kind == "pipeline" else None
    values = {key: _value(ctx, d, key, spec, path, distribution) for key, spec in KEYS[kind].items()}
    options = tuple((k, v) for k, v in values.items() if k not in _FIELDS)
    return BodySpec(**{k: v for k, v in values.items() if k in _FIELDS}, options=options), pipeline
