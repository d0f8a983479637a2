"""The engine's prefix cache: 16-token blocks keyed by the hash of the whole prefix (vLLM's scheme),
LRU-evicted; a hit needs every earlier block to hit too. Pure.

Usage::

    cache = PrefixCache(capacity_blocks=1000)
    hashes = prompt_block_hashes(words)
    cached_tokens = cache.lookup(hashes, len(words)); cache.insert(hashes)
    cache.clear()                                     # a reset: no block is cached any more
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence as Seq

BLOCK_SIZE = 16


def prompt_block_hashes(words: Seq[str]) -> list[int]:
    """Hash of the whole prefix up to the end of each full 16-word block (vLLM's scheme)."""
    hashes = []
    h = 0
    for start in range(0, len(words) - BLOCK_SIZE + 1, BLOCK_SIZE):
        h = hash((h, tuple(words[start:start + BLOCK_SIZE])))
        hashes.append(h)
    return hashes


class PrefixCache:
    """LRU set of block hashes; a hit needs every earlier block to hit too."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = max(0, capacity_blocks)
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queried_tokens = 0
        self.hit_tokens = 0

    def lookup(self, hashes: list[int], prompt_len: int) -> int:
        """Cached tokens for a prompt; touches the hit blocks so they stay."""
        hit = 0
        for h in hashes:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            hit += 1
        # vLLM always recomputes the last prompt token to get logits for sampling.
        cached = min(hit * BLOCK_SIZE, max(prompt_len - 1, 0))
        self.queried_tokens += prompt_len
        self.hit_tokens += cached
        return cached

    def insert(self, hashes: list[int]) -> None:
        for h in hashes:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)

    def clear(self) -> int:
        """Forget every block (vLLM's /reset_prefix_cache, SGLang's /flush_cache); the hit counters stay
        (they are Prometheus counters). Returns the blocks forgotten."""
        n = len(self._blocks)
        self._blocks.clear()
        return n

    def __len__(self) -> int:
        return len(self._blocks)
