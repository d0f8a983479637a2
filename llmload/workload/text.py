"""Synthetic prompt text whose length in tokens is predictable without a tokenizer.

Every word in ``WORDS`` is a common lowercase English word that Llama-3, Qwen2.5 and GPT-4o
(cl100k/o200k) tokenizers encode as a single token when preceded by a space, so a prompt of
N words is close to N tokens for them (and exactly N for `llmload mock`, which counts words).

:class:`TextSource` builds a random corpus once per process and cuts prompts out of it, so a
prompt of any length costs a string slice, not N random draws
(benchmarks/workload_cost.py measures it).
"""

from __future__ import annotations

import random

WORDS = (
    "the of and to in is that for it as with was on be by at this are from or an have not they which "
    "one you were all we her she there would their will when can more if no out so said what up its "
    "about into than them only other new some could time these two may then first any like now my "
    "such over also after did many most made where much your well way down should because each just "
    "those people how too little state good very make world still own see men work long get here "
    "between both life being under never day same another know while last might us great old year "
    "off come since against go came right used take three states himself few house use during "
    "without again place around however home small found thought went say part once general high "
    "upon school every don does got united left number course war until always away something fact "
    "though water less public put think almost hand enough far took head yet government system better "
    "set told nothing night end why called didn eyes find going look asked later knew point next "
    "program city business give group toward young days let room president side social given present "
    "several order national possible rather second face per among form important often things looked "
    "early white case john become large big need four within felt children along saw best church ever "
    "least power development light thing seemed family interest want members mind country area others "
    "done turned although open god service problem certain kind different thus began door help means "
    "sense whole matter perhaps itself york times law human line above name example action company "
    "hands local show five history gave today either act feet across taken past quite anything seen "
    "having death experience body word half really week field car words already information tell "
    "together college shall money period held keep sure free seems real behind cannot miss political "
    "air question making office brought whose special heard major problems ago became federal"
).split()

CORPUS_WORDS = 1 << 16


def words(rng: random.Random, n: int) -> str:
    """``n`` words drawn at random: a text of about ``n`` tokens."""
    if n <= 0:
        return ""
    return " ".join(rng.choices(WORDS, k=n))


def unique_text(rng: random.Random, n: int, tag: str) -> str:
    """``n`` words that start with ``tag`` (unique per request), so no two prompts share a
    cacheable first block by accident."""
    if n <= 0:
        return ""
    return tag + " " + words(rng, n - 1) if n > 1 else tag


class TaggedTexts:
    """Texts no other request has: each starts with its own tag (``PREFIXnN``, N counting up), then
    words of ``text`` (the run's corpus or tokenizer) or random words. For workloads whose requests a
    cache must not answer (rerank passages, tokenize texts).

    Usage::

        texts = TaggedTexts("r1f", rng, text)
        texts(16)          # 16 tokens, the first one "r1fn1"
    """

    def __init__(self, prefix: str, rng: random.Random, text: TextSource | None = None) -> None:
        self.prefix, self.rng, self.text = prefix, rng, text
        self._n = 0

    def __call__(self, length: int) -> str:
        self._n += 1
        tag = f"{self.prefix}n{self._n}"
        return self.text.text(self.rng, length, tag) if self.text is not None else unique_text(self.rng, length, tag)


class TextSource:
    """Random text of an exact word count, cut from a corpus built once.

    Usage::

        src = TextSource(seed=1)
        src.text(rng, 500, tag="u3n17")   # 500 words, the first being the tag
    """

    def __init__(self, seed: int, corpus_words: int = CORPUS_WORDS) -> None:
        r = random.Random(seed)
        self.corpus = " ".join(r.choices(WORDS, k=corpus_words)) + " "
        starts = [0]
        find = self.corpus.find
        pos = find(" ")
        while pos >= 0 and len(starts) < corpus_words:
            starts.append(pos + 1)
            pos = find(" ", pos + 1)
        self.starts = starts
        self.n = len(starts)

    def span(self, rng: random.Random, n: int) -> str:
        """``n`` consecutive corpus words from a random place (wrapping round)."""
        if n <= 0:
            return ""
        corpus, starts, total = self.corpus, self.starts, self.n
        i = rng.randrange(total)
        if i + n < total:  # the usual case: one slice, without its trailing space
            return corpus[starts[i]:starts[i + n] - 1]
        parts = []
        left = n
        while left > 0:
            take = min(left, total - i)
            end = starts[i + take] if i + take < total else len(corpus)
            parts.append(corpus[starts[i]:end])
            left -= take
            i = 0
        return "".join(parts)[:-1]

    def text(self, rng: random.Random, n: int, tag: str = "") -> str:
        if n <= 0:
            return ""
        if not tag:
            return self.span(rng, n)
        return tag if n == 1 else tag + " " + self.span(rng, n - 1)



class TokenizedTextSource(TextSource):
    """Like TextSource, but lengths are exact in a local tokenizer's tokens (``tokenizer:`` in
    the scenario, a tokenizer.json read with the ``tokenizers`` package; nothing is downloaded)."""

    def __init__(self, seed: int, tokenizer_path: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ValueError(f"tokenizer {tokenizer_path}: the 'tokenizers' package is not installed "
                             "(pip install tokenizers), or remove tokenizer: from the scenario") from None
        super().__init__(seed)
        self.tokenizer = Tokenizer.from_file(tokenizer_path)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def text(self, rng: random.Random, n: int, tag: str = "") -> str:
        if n <= 0:
            return ""
        words_n = n
        out = super().text(rng, words_n, tag)
        for _ in range(8):  # 1-2 steps where most words are one token; a few more where a word is several
            got = self.count(out)
            if got == n:
                return out
            # scale by the tokens a word took (several in a small vocabulary), then word by word
            step = (round(words_n * n / got) - words_n) if got else words_n
            words_n = max(1, words_n + (step or (1 if got < n else -1)))
            parts = out.split(" ")
            if words_n <= len(parts):
                out = " ".join(parts[:words_n])
            else:
                out = out + " " + self.span(rng, words_n - len(parts))
        return self._cut(rng, out, n)

    def _cut(self, rng: random.Random, out: str, n: int) -> str:
        """Exactly ``n`` tokens where words do not land on it: the text's first ``n`` token ids,
        decoded (a word may be cut), or the nearest count found."""
        while self.count(out) < n:
            out = out + " " + self.span(rng, n)
        ids = self.tokenizer.encode(out, add_special_tokens=False).ids
        best, best_gap = out, abs(self.count(out) - n)
        for k in (n, n - 1, n + 1, n - 2, n + 2):
            if k <= 0:
                continue
            cut = self.tokenizer.decode(ids[:k])
            gap = abs(self.count(cut) - n)
            if gap == 0:
                return cut
            if gap < best_gap:
                best, best_gap = cut, gap
        return best
