"""vLLM's prefix-caching block pool, simulated: what decides the GPU-local hit rate (run C).

Blocks 1..P (0 is vLLM's null block). A full block is cached under the hash of its token prefix;
a freed block keeps its hash and goes to the tail of the free queue, allocation takes the head
(LRU), evicting the cached hash it held. A finished request frees its blocks tail-first, so a
prompt's later blocks are evicted before its earlier ones and a prefix decays from the end.
"""

from collections import OrderedDict


def block_hashes(tokens, block: int) -> list:
    """One hash per full block, chained over the prefix (vLLM hashes parent hash + block tokens)."""
    out, parent = [], None
    for i in range(len(tokens) // block):
        parent = hash((parent, tuple(tokens[i * block:(i + 1) * block])))
        out.append(parent)
    return out


class BlockPool:
    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self.free = OrderedDict((b, None) for b in range(1, num_blocks + 1))   # head = evicted next
        self.refs = {}
        self.cached = {}          # hash -> block
        self.hash_of = {}         # block -> hash
        self.evictions = 0

    def cached_prefix(self, hashes) -> list:
        """Blocks of the longest cached prefix (not yet referenced)."""
        hit = []
        for h in hashes:
            b = self.cached.get(h)
            if b is None:
                break
            hit.append(b)
        return hit

    def num_free(self) -> int:
        return len(self.free)

    def allocate(self, hit_blocks: list, new: int):
        """Touch the hit blocks and take ``new`` fresh ones; None (nothing changed) if they don't fit."""
        reclaimed = sum(1 for b in hit_blocks if b in self.free)
        if len(self.free) - reclaimed < new:
            return None
        for b in hit_blocks:
            self.free.pop(b, None)
            self.refs[b] = self.refs.get(b, 0) + 1
        fresh = []
        for _ in range(new):
            b, _ = self.free.popitem(last=False)
            old = self.hash_of.pop(b, None)
            if old is not None:
                del self.cached[old]
                self.evictions += 1
            self.refs[b] = 1
            fresh.append(b)
        return fresh

    def cache(self, block: int, h) -> None:
        """A block now holds the KV of this prefix hash (after prefill or a load)."""
        if h in self.cached or block in self.hash_of:
            return
        self.cached[h] = block
        self.hash_of[block] = h

    def release(self, blocks: list) -> None:
        for b in reversed(blocks):          # tail first: the tail is evicted first
            self.refs[b] -= 1
            if self.refs[b] == 0:
                del self.refs[b]
                self.free[b] = None
