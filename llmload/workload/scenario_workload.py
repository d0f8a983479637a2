"""A scenario workload: turns a WorkloadSpec into one user's stream of requests. Pure (given a clock-free
RNG); the user does the sleeping, the concurrency caps and the sending.

* Prompts: optional shared prefix (system message; same bytes for the same group and index in
  every process) + a unique user message of ``input_tokens`` words starting with a unique tag.
* Sessions: each turn is one request; the history carries the *actual* replies (the request
  asks for the reply text); ``wait_s`` on a turn after the first is the think time.
* Datasets: conversations replayed turn by turn (``turns: all``) with the real replies in the
  history, or single requests of their first turn.
* Images (``images:``): every user message gets the workload's pictures as content parts;
  ``image_tokens`` counts those of the whole prompt (earlier turns' pictures stay in the history).

Usage::

    w = ScenarioWorkload(spec.workload("rag"), scenario_seed=7, user_seed=123, model="m",
                         text=TextSource(7))
    req = w.next_request()
    w.on_reply(req, reply_text, ok=True)
"""

from __future__ import annotations

import bisect
import itertools
import random
import zlib
from typing import Any

from llmload.wire.endpoints import endpoint as endpoint_of
from llmload.workload.dataset import Conversation
from llmload.workload.distributions import Distribution
from llmload.workload.file.spec import PrefixGroup, WorkloadSpec
from llmload.workload.request import LLMRequest
from llmload.workload.tasks.agent import content_words
from llmload.workload.text import TextSource, words

DEFAULT_OUTPUT = 128


def stable_seed(*parts: Any) -> int:
    """A seed that is the same in every process (``hash()`` is salted per process)."""
    return zlib.crc32("/".join(str(p) for p in parts).encode())


class PrefixPool:
    """The shared prefixes of one workload, built on first use and cached."""

    def __init__(self, groups: tuple[PrefixGroup, ...], scenario_seed: int, workload: str,
                 prime: bool = False) -> None:
        self.groups = groups
        # prime: the first picks go through every prefix once, so each is in the cache before the
        # draws by popularity begin (with a warm-up, none of those first uses is measured)
        self._unprimed = [(gi, i) for gi, g in enumerate(groups) for i in range(g.count)][::-1] if prime else []
        self._seed = scenario_seed
        self._workload = workload
        self._group_cum = list(itertools.accumulate(g.weight for g in groups))
        self._index_cum = [list(itertools.accumulate(
            1.0 / (i + 1) ** g.zipf_s if g.popularity == "zipf" else 1.0 for i in range(g.count))) for g in groups]
        self._texts: dict[tuple[int, int], str] = {}

    def pick(self, rng: random.Random) -> tuple[PrefixGroup, int, str]:
        if self._unprimed:
            gi, idx = self._unprimed.pop()
            return self.groups[gi], idx, self.text(gi, idx)
        gi = bisect.bisect_right(self._group_cum, rng.random() * self._group_cum[-1])
        gi = min(gi, len(self.groups) - 1)
        cum = self._index_cum[gi]
        idx = min(bisect.bisect_right(cum, rng.random() * cum[-1]), len(cum) - 1)
        return self.groups[gi], idx, self.text(gi, idx)

    def text(self, gi: int, idx: int) -> str:
        key = (gi, idx)
        t = self._texts.get(key)
        if t is None:
            g = self.groups[gi]
            r = random.Random(stable_seed(self._seed, self._workload, g.name, idx))
            tag = f"{g.name}{idx}"
            t = tag + (" " + words(r, g.tokens - 1) if g.tokens > 1 else "")
            self._texts[key] = t
        return t


class ScenarioWorkload:
    """One user's requests for one workload of a scenario."""

    def __init__(self, spec: WorkloadSpec, scenario_seed: int, user_seed: int, model: str, text: TextSource,
                 prefixes: PrefixPool | None = None, conversations: list[Conversation] | None = None,
                 input_tokens: Distribution | None = None, output_tokens: Distribution | None = None,
                 ignore_eos: bool | None = None, endpoint: str | None = None, images: Any = None) -> None:
        self.spec = spec
        self.model = model
        self.rng = random.Random(user_seed)
        self.text = text
        self.prefixes = prefixes if prefixes is not None else (
            PrefixPool(spec.prefix_groups, scenario_seed, spec.name) if spec.prefix_groups else None)
        self.conversations = conversations
        self.input_tokens = input_tokens or spec.input_tokens
        self.output_tokens = output_tokens or spec.output_tokens
        self.ignore_eos = spec.ignore_eos if ignore_eos is None else ignore_eos
        self.chat = endpoint_of(endpoint or spec.endpoint).takes == "messages"  # chat, responses, messages
        self._tag = f"s{user_seed:x}"
        self.images = images if self.chat else None
        self._history_image_tokens = 0
        self._n = 0
        self._sessions = 0
        # the session in progress: id, turn number, turns planned, history, conversation
        self._sid = ""
        self._turn = 0
        self._turns = 0
        self._history: list[dict[str, str]] = []
        self._history_words = 0
        self._system: str | None = None
        self._prefix_id = ""  # the shared prefix of the request (or session) in progress
        self._conv: Conversation | None = None

    # -- the Workload interface -----------------------------------------------------------------
    def next_request(self) -> LLMRequest:
        self._n += 1
        multi = self.spec.session is not None or (self.conversations is not None and self.spec.dataset is not None
                                                  and self.spec.dataset.turns == "all")
        if multi and self._turn < self._turns:
            return self._next_turn()
        if multi:
            self._start_session()
            return self._next_turn()
        return self._single()

    def on_reply(self, request: LLMRequest, text: str, ok: bool) -> None:
        if not request.session_id or request.session_id != self._sid:
            return
        if not ok:
            self._turns = self._turn  # a failed turn ends the conversation: the next request starts anew
            return
        user = request.messages[-1]["content"] if request.messages else (request.prompt or "")
        self._history.append({"role": "user", "content": user})
        self._history.append({"role": "assistant", "content": text})
        self._history_words += content_words(user) + len(text.split())
        if self.images is not None:
            self._history_image_tokens += self.images.tokens

    # -- internals ------------------------------------------------------------------------------
    def _user_text(self, n: int) -> str:
        return self.text.text(self.rng, max(n, 1), tag=f"{self._tag}n{self._n}")

    def _max_tokens(self, reply_words: int | None) -> int:
        if self.output_tokens is not None:
            return int(self.output_tokens.sample(self.rng))
        return max(1, reply_words) if reply_words else DEFAULT_OUTPUT

    def _request(self, messages: list[dict[str, str]], max_tokens: int, words_in: int, session: str = "",
                 turn: int | None = None, want_text: bool = False, wait_s: float = 0.0,
                 resent: int | None = None) -> LLMRequest:
        spec = self.spec
        req = LLMRequest(scenario=spec.name, max_tokens=max_tokens, model=self.model, sampling=dict(spec.sampling),
                         extra=dict(spec.extra), session_id=session, turn=turn, want_text=want_text,
                         input_tokens=words_in, wait_s=wait_s, resent_tokens=resent)
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        req.prefix_id = self._prefix_id
        if self.chat and self.images is not None:
            last = messages[-1]
            messages[-1] = {**last, "content": self.images.content(last["content"], self.rng)}
            req.image_tokens = self._history_image_tokens + self.images.tokens
            req.messages = messages
        elif self.chat:
            req.messages = messages
        else:
            req.prompt = "\n".join(m["content"] for m in messages)
        return req

    def _system_message(self) -> tuple[list[dict[str, str]], int]:
        self._prefix_id = ""
        if self.prefixes is not None:
            _g, _i, prefix = self.prefixes.pick(self.rng)
            self._prefix_id = f"{self.spec.name}.{_g.name}{_i}"
            return [{"role": "system", "content": prefix}], _g.tokens
        if self.spec.system_prompt:
            return [{"role": "system", "content": self.spec.system_prompt}], len(self.spec.system_prompt.split())
        return [], 0

    def _single(self) -> LLMRequest:
        system, n_sys = self._system_message()
        if self.conversations is not None:
            conv = self.conversations[self.rng.randrange(len(self.conversations))]
            turn = conv.turns[0]
            if conv.system and not system:
                system, n_sys = [{"role": "system", "content": conv.system}], len(conv.system.split())
            text, reply = turn.text, turn.reply_words
            n_user = len(text.split())
        else:
            n_user = max(1, int(self.input_tokens.sample(self.rng)))
            text, reply = self._user_text(n_user), None  # exactly n_user words: no need to count them
        # A fixed system prompt is sent again by every request (a prefix group's is the scenario's
        # expected hit ratio already, and a dataset's differs per conversation).
        fixed = n_sys if self.prefixes is None and self.spec.system_prompt and system else None
        return self._request([*system, {"role": "user", "content": text}], self._max_tokens(reply),
                             n_sys + n_user, resent=fixed)

    def _start_session(self) -> None:
        self._sessions += 1
        self._sid = f"{self._tag}-{self._sessions}"
        self._turn = 0
        self._history = []
        self._history_words = 0
        self._history_image_tokens = 0
        system, _ = self._system_message()
        self._system = system[0]["content"] if system else None
        if self.conversations is not None:
            self._conv = self.conversations[self.rng.randrange(len(self.conversations))]
            if self._conv.system and self._system is None:
                self._system = self._conv.system
            planned = len(self._conv.turns)
            if self.spec.session is not None:
                planned = min(planned, int(self.spec.session.turns.sample(self.rng)))
            self._turns = max(1, planned)
        else:
            self._conv = None
            self._turns = max(1, int(self.spec.session.turns.sample(self.rng)))

    def _next_turn(self) -> LLMRequest:
        self._turn += 1
        if self._conv is not None:
            t = self._conv.turns[self._turn - 1]
            text, reply = t.text, t.reply_words
            n_user = len(text.split())
        else:
            n_user = max(1, int(self.input_tokens.sample(self.rng)))
            text, reply = self._user_text(n_user), None
        messages = ([{"role": "system", "content": self._system}] if self._system else []) + self._history + [
            {"role": "user", "content": text}]
        n_sys = len(self._system.split()) if self._system else 0
        words_in = self._history_words + n_user + n_sys
        think = 0.0
        if self._turn > 1 and self.spec.session is not None:
            think = float(self.spec.session.think_time_s.sample(self.rng))
        # Sent before by design: the conversation so far, and the system prompt after the first turn
        # (a fixed one from the first: every session sends it)
        fixed = self.prefixes is None and self.spec.system_prompt is not None
        resent = self._history_words + (n_sys if self._turn > 1 or fixed else 0)
        return self._request(messages, self._max_tokens(reply), words_in, session=self._sid, turn=self._turn,
                             want_text=self._turn < self._turns, wait_s=think, resent=resent)
