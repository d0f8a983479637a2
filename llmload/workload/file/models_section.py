"""The ``models:`` section of a workload: a mix of models or LoRA adapters (:mod:`llmload.workload.model_mix`).

Three spellings::

    models: {base: 0.5, adapter-a: 0.3, adapter-b: 0.2}         # weights (any scale), per request
    models: [base, adapter-a, adapter-b]                         # equal weights
    models:                                                      # the long form
      per: session                                               # request (default) | session
      weights: {base: 0.5, adapter-a: 0.5}                       # or:
      zipf: {n: 16, s: 1.1, prefix: adapter-, first: 1, base: base-model, base_share: 0.2}

A mapping with ``per``, ``weights`` or ``zipf`` among its keys is the long form (a model named
``per`` is written in ``weights:``).

Usage::

    mix = parse_models(ctx, raw, "workloads.chat.models")   # -> ModelMix, or a ScenarioError
"""

from __future__ import annotations

from typing import Any

from llmload.workload.file.yaml_lines import Ctx, choice, keys, number, whole
from llmload.workload.model_mix import PER, ModelMix, weighted_mix, zipf_mix

MODELS_KEYS = {"per", "weights", "zipf"}
ZIPF_KEYS = {"n", "s", "prefix", "first", "base", "base_share"}
MAX_MODELS = 10_000


def parse_models(ctx: Ctx, raw: Any, path: str) -> ModelMix:
    if isinstance(raw, dict) and MODELS_KEYS & set(raw):
        d = keys(ctx, raw, path, MODELS_KEYS)
        per = choice(ctx, d, "per", path, PER, "request")
        if ("weights" in d) == ("zipf" in d):
            raise ctx.error(path, "expected either weights: or zipf:, not " + ("both" if "zipf" in d else "neither"))
        if "zipf" in d:
            return _zipf(ctx, d["zipf"], f"{path}.zipf", per)
        return _weights(ctx, d["weights"], f"{path}.weights", per)
    return _weights(ctx, raw, path, "request")


def _text(ctx: Ctx, value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ctx.error(path, f"expected a model name (text without surrounding spaces), got {value!r}")
    return value


def _weights(ctx: Ctx, raw: Any, path: str, per: str) -> ModelMix:
    if isinstance(raw, list):
        names = [_text(ctx, n, f"{path}[{i}]") for i, n in enumerate(raw)]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ctx.error(path, f"{twice!r} is listed twice")
        raw = dict.fromkeys(names, 1.0)
    if not isinstance(raw, dict) or not raw:
        raise ctx.error(path, "expected a mapping of model names to weights ({base: 0.5, adapter-a: 0.5}), a list of "
                        f"names, or {{zipf: {{n: 16}}}}; got {raw!r}")
    if len(raw) > MAX_MODELS:
        raise ctx.error(path, f"{len(raw):,} models is too many: expected at most {MAX_MODELS:,}")
    weights = {}
    for name in raw:
        _text(ctx, name, f"{path}.{name}")
        weights[name] = number(ctx, raw, name, path, strict=True)  # > 0: "expected a number > 0, got 0"
    return weighted_mix(weights, per)


def _zipf(ctx: Ctx, raw: Any, path: str, per: str) -> ModelMix:
    z = keys(ctx, raw, path, ZIPF_KEYS)
    if "n" not in z:
        raise ctx.error(f"{path}.n", "missing: how many adapters the traffic is spread over")
    base = _text(ctx, z["base"], f"{path}.base") if "base" in z else None
    if (base is None) != ("base_share" not in z):
        missing = "base_share" if base is not None else "base"
        raise ctx.error(f"{path}.{missing}", "missing: base (the base model's name) and base_share (its share of "
                        "the requests, 0..1) go together")
    share = number(ctx, z, "base_share", path, default=0.0)
    if base is not None and not 0 < share < 1:
        raise ctx.error(f"{path}.base_share", f"expected a share between 0 and 1 (both excluded), got {share!r}")
    prefix = z.get("prefix", "adapter-")
    if not isinstance(prefix, str):
        raise ctx.error(f"{path}.prefix", f"expected text (the adapters' names are PREFIX + rank), got {prefix!r}")
    return zipf_mix(n=whole(ctx, z, "n", path, maximum=MAX_MODELS), s=number(ctx, z, "s", path, default=1.0),
                    prefix=prefix, base=base, base_share=share, per=per,
                    first=whole(ctx, z, "first", path, default=1, minimum=0))
