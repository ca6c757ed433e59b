"""The long-doc-qa workload of ``lmcache bench engine``: documents, queries and their schedule.

Token ids stand in for text: a document is a seeded random token list, a query appends a short
suffix ("\\n\\nQuestion q: ...") that differs per query, as the real prompts do.
"""

import random
from dataclasses import dataclass

VOCAB = 128000
SUFFIX_TOKENS = 24        # a short question


@dataclass(frozen=True)
class Prompt:
    doc: int
    query: int            # -1: warmup
    tokens: tuple


def num_documents(tokens_per_gb: float, volume_gb: float, doc_len: int) -> int:
    """As LMCache's bench: max(1, int(GB * tokens_per_gb / L))."""
    return max(1, int(volume_gb * tokens_per_gb / doc_len))


def document(seed: int, doc: int, length: int) -> list:
    rng = random.Random(f"{seed}/doc/{doc}")
    return [rng.randrange(VOCAB) for _ in range(length)]


def suffix(seed: int, query: int) -> list:
    rng = random.Random(f"{seed}/query/{query}")
    return [rng.randrange(VOCAB) for _ in range(SUFFIX_TOKENS)]


ONE_OFF_DOC = 1 << 30      # one-off documents' ids start here (never a repeated document's)


class Workload:
    def __init__(self, num_docs: int, doc_len: int, queries: int, policy: str, seed: int, one_hit_share: float = 0.0):
        self.num_docs, self.doc_len, self.queries, self.policy, self.seed = num_docs, doc_len, queries, policy, seed
        self.docs = [document(seed, d, doc_len) for d in range(num_docs)]
        self.suffixes = {q: suffix(seed, q) for q in range(-1, queries)}
        self.one_hit_share = one_hit_share
        self.one_offs = 0     # one-off documents made so far: each benchmark pass gets new ones

    def prompt(self, doc: int, query: int) -> Prompt:
        tokens = document(self.seed, doc, self.doc_len) if doc >= ONE_OFF_DOC else self.docs[doc]
        return Prompt(doc, query, tuple(tokens + self.suffixes[query]))

    def warmup(self) -> list:
        """Each document once (LMCache sends them one at a time with max_tokens 1)."""
        return [self.prompt(d, -1) for d in range(self.num_docs)]

    def benchmark(self) -> list:
        pairs = [(d, q) for q in range(self.queries) for d in range(self.num_docs)]   # "tile": query-major
        if self.one_hit_share > 0:
            # one-hit wonders (issue 50): documents asked once and never again, this share of the pass's prompts,
            # spread evenly through it (new ones on every pass, so no pass repeats another's)
            extra = round(len(pairs) * self.one_hit_share / (1 - self.one_hit_share))
            ones = [(ONE_OFF_DOC + self.one_offs + i, i % self.queries) for i in range(extra)]
            self.one_offs += extra
            placed = [((i + 0.5) / len(pairs), p) for i, p in enumerate(pairs)] + [((j + 0.5) / extra, p) for j, p in enumerate(ones)]
            pairs = [p for _, p in sorted(placed, key=lambda x: x[0])]
        if self.policy == "random":
            random.Random(42).shuffle(pairs)    # LMCache's fixed shuffle seed
        return [self.prompt(d, q) for d, q in pairs]


class HotScanWorkload:
    """Where eviction policies differ (issue 29): a hot set of documents revisited every round, and between
    the visits a one-off scan of new documents larger than the server's pool. LRU lets each scan push the hot
    set out; a scan-resistant policy (ARC, S3FIFO) keeps it. Warmup stores the hot set once; each benchmark
    round asks the hot documents (with that round's question), then its own scan documents."""

    def __init__(self, hot: int, scan: int, rounds: int, doc_len: int, seed: int):
        self.hot, self.scan, self.rounds, self.doc_len, self.seed = hot, scan, rounds, doc_len, seed
        self.queries = rounds
        self.num_docs = hot + scan * rounds
        self.docs = [document(seed, d, doc_len) for d in range(self.num_docs)]
        self.suffixes = {q: suffix(seed, q) for q in range(-1, rounds)}

    def prompt(self, doc: int, query: int) -> Prompt:
        return Prompt(doc, query, tuple(self.docs[doc] + self.suffixes[query]))

    def warmup(self) -> list:
        return [self.prompt(d, -1) for d in range(self.hot)]

    def benchmark(self) -> list:
        out = []
        for r in range(self.rounds):
            out += [self.prompt(d, r) for d in range(self.hot)]
            out += [self.prompt(self.hot + r * self.scan + i, r) for i in range(self.scan)]
        return out
