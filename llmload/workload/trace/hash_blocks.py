"""Prompt text from Mooncake ``hash_ids``: equal ids give equal text, in every process.

A Mooncake request lists one hash id per 512-token block of its prompt; two requests that
start with the same ids share that prefix (and a server's prefix cache can reuse it). Here each
id becomes ``block_tokens`` words of llmload's one-token-per-word text (``text.words``),
drawn from an RNG seeded by ``zlib.crc32`` of the id (never ``hash()``, which is salted per
process), so every Locust worker writes the same block for the same id. A prompt is its blocks
in order, joined by a space so no two words merge at a seam, with the last block cut so the
prompt is exactly ``input_tokens`` words.

Usage::

    prompt = prompt_from_hash_ids((0, 7, 8), input_tokens=1300)      # 512 + 512 + 276 words
    other = prompt_from_hash_ids((0, 7, 9), input_tokens=1100)       # same first 1024 words
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache

from llmload.workload.text import words

BLOCK_TOKENS = 512
"""Mooncake's block size (FAST25-release/README.md: "The block size is 512 tokens")."""
BLOCK_CACHE = 4096
"""Blocks kept per process: ~2.6 KB each at 512 words, so ~11 MB. A trace's shared blocks are
its leading ones, hit again and again; the rest are used once and age out."""


def block_seed(hash_id: int, seed: int = 0) -> int:
    """The RNG seed of a block. The id goes in as 8 fixed bytes: CRC-32 of a fixed-length message
    is one-to-one over 32 bits of difference, so distinct ids below 2**32 never share a block.
    ``seed`` (the CRC's start value) gives a run its own text, so a server's cache from an
    earlier run with another seed does not help."""
    return zlib.crc32(hash_id.to_bytes(8, "little"), seed & 0xFFFFFFFF)


@lru_cache(maxsize=BLOCK_CACHE)
def block_text(hash_id: int, block_tokens: int = BLOCK_TOKENS, seed: int = 0) -> str:
    """``block_tokens`` words for one hash id (a block of fewer words is a prefix of a longer one)."""
    if hash_id < 0 or hash_id >= 1 << 64:
        raise ValueError(f"hash id {hash_id}: expected a whole number in 0..2**64-1")
    return words(random.Random(block_seed(hash_id, seed)), block_tokens)


def _first_words(text: str, n: int) -> str:
    return " ".join(text.split(" ", n)[:n])


def prompt_from_hash_ids(hash_ids: Sequence[int], input_tokens: int, block_tokens: int = BLOCK_TOKENS,
                         seed: int = 0, fill: Callable[[int], str] | None = None) -> str:
    """A prompt of exactly ``input_tokens`` words made of the blocks of ``hash_ids`` in order.

    Ids past what ``input_tokens`` needs are ignored. When the ids cover fewer words than
    ``input_tokens`` (a trace whose ids stop short), ``fill(n)`` supplies the last ``n`` words:
    pass request-unique text there, since nothing says that tail is shared.
    """
    if block_tokens < 1:
        raise ValueError(f"block_tokens: expected a whole number >= 1, got {block_tokens}")
    parts = []
    left = input_tokens
    for hid in hash_ids:
        if left <= 0:
            break
        text = block_text(hid, block_tokens, seed)
        if left >= block_tokens:
            parts.append(text)
            left -= block_tokens
        else:
            parts.append(_first_words(text, left))
            left = 0
    if left > 0:
        if fill is None:
            raise ValueError(f"{len(hash_ids)} hash ids of {block_tokens} tokens cover {input_tokens - left} of "
                             f"{input_tokens} input tokens: pass fill= for the rest")
        tail = fill(left)
        if tail:
            parts.append(tail)
    return " ".join(parts)

