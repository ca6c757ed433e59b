"""vLLM's side of one pass: a scheduler with at most M requests in flight over a prefix-caching
block pool, and (mode D) LMCacheMPConnector's calls for each request.

Per scheduler step: admit waiting requests while fewer than M run and their blocks fit (vLLM
admits only what it can allocate); for the admitted batch: GPU-local hit = longest cached prefix
in blocks; LOOKUP + QUERY_PREFETCH_STATUS; RETRIEVE the server's hit beyond the GPU hit into the
request's new blocks (skip_first_n_tokens = the GPU hit, as the connector does); "prefill" the
rest (write each block's pattern); STORE the chunks the server did not have. A request then
decodes for ``output_len`` steps, frees its blocks and sends END_SESSION.

STOREs go chunk by chunk (one request per chunk, all of a batch in flight together): that is how
chunked prefill hands them over, and a chunk the pool cannot take costs that chunk only.
"""

import time
from collections import deque
from dataclasses import dataclass, field

from .blockpool import BlockPool, block_hashes
from .transport import key

NULL = 0


@dataclass
class Request:
    rid: str
    prompt: object
    hashes: list
    blocks: list
    gpu_hit: int              # tokens
    steps_left: int
    server_hit: int = 0       # tokens, as QUERY said
    loaded: int = 0           # tokens actually retrieved beyond the GPU hit


@dataclass
class PhaseStats:
    requests: int = 0
    prompt_tokens: int = 0
    cacheable_tokens: int = 0     # what a hit can cover: the full chunks before the last token, or the GPU's block hit if longer
    gpu_hit_tokens: int = 0
    external_hit_tokens: int = 0
    lookup_s: list = field(default_factory=list)
    retrieve_s: list = field(default_factory=list)
    retrieve_bytes: int = 0
    retrieve_wall_s: float = 0.0
    store_s: list = field(default_factory=list)
    store_request_bytes: list = field(default_factory=list)
    store_bytes: int = 0
    store_wall_s: float = 0.0
    stores: int = 0
    stores_failed: int = 0
    retrieves_failed: int = 0
    verified_blocks: int = 0
    verify_mismatches: int = 0
    gpu_pool_evictions: int = 0
    wall_s: float = 0.0


class Engine:
    def __init__(self, model, pool_blocks, inflight, conn=None, kv=None, instance=0, model_name="",
                 verify=False, tag="r"):
        self.model, self.inflight, self.conn, self.kv = model, inflight, conn, kv
        self.pool = BlockPool(pool_blocks)
        self.instance, self.model_name, self.verify, self.tag = instance, model_name, verify, tag
        self.bpc = model.chunk // model.block
        self._n = 0

    # --- the scheduler -----------------------------------------------------------------------

    def run(self, prompts, output_len) -> PhaseStats:
        stats = PhaseStats()
        evictions0 = self.pool.evictions
        waiting, running = deque(prompts), []
        t0 = time.perf_counter()
        while waiting or running:
            batch = []
            while waiting and len(running) + len(batch) < self.inflight:
                req = self._admit(waiting[0], output_len)
                if req is None:
                    if not running and not batch:
                        raise SystemExit(f"--gpu-pool-blocks {self.pool.num_blocks} cannot hold one request "
                                         f"of {len(waiting[0].tokens) + output_len} tokens")
                    break
                waiting.popleft()
                batch.append(req)
            if batch:
                self._prefill(batch, stats)
            running += batch
            for r in running:
                r.steps_left -= 1
            done = [r for r in running if r.steps_left <= 0]
            running = [r for r in running if r.steps_left > 0]
            for r in done:
                self.pool.release(r.blocks)
            if self.conn and done:
                uids = [self.conn.submit("end_session", r.rid, None) for r in done]
                self.conn.wait(uids)
        stats.wall_s = time.perf_counter() - t0
        stats.gpu_pool_evictions = self.pool.evictions - evictions0
        return stats

    def _admit(self, prompt, output_len):
        block = self.model.block
        hashes = block_hashes(prompt.tokens, block)
        # vLLM recomputes at least the last prompt token: a hit never covers the whole prompt
        hit = self.pool.cached_prefix(hashes)[:(len(prompt.tokens) - 1) // block]
        total = -(-(len(prompt.tokens) + output_len) // block)
        fresh = self.pool.allocate(hit, total - len(hit))
        if fresh is None:
            return None
        blocks = hit + fresh
        for i in range(len(hit), len(hashes)):
            self.pool.cache(blocks[i], hashes[i])     # vLLM caches full blocks when it schedules them
        self._n += 1
        return Request(f"ldqa-{self.tag}-{self._n}", prompt, hashes, blocks, len(hit) * block, max(1, output_len))

    # --- one batch's connector work and prefill --------------------------------------------

    def _prefill(self, batch, stats):
        chunk = self.model.chunk
        for r in batch:
            n = len(r.prompt.tokens)
            stats.requests += 1
            stats.prompt_tokens += n
            # the server hits whole chunks, the GPU whole blocks: a GPU hit may reach past the last full chunk
            stats.cacheable_tokens += max(((n - 1) // chunk) * chunk, r.gpu_hit)
            stats.gpu_hit_tokens += r.gpu_hit
        if self.conn:
            self._lookup(batch, stats)
            self._retrieve(batch, stats)
        if self.kv is not None:
            for r in batch:
                first = (r.gpu_hit + r.loaded) // self.model.block
                for gi in range(len(self.model.groups)):
                    self.kv.fill(gi, r.blocks[first:len(r.hashes)], r.hashes[first:])
        if self.conn:
            self._store(batch, stats)
        for r in batch:
            stats.external_hit_tokens += r.loaded

    def _lookup(self, batch, stats):
        chunk = self.model.chunk
        uids = [self.conn.submit("lookup", key(self.model_name, r.prompt.tokens, 0, len(r.prompt.tokens), r.rid, None), 1)
                for r in batch]
        looked = self.conn.wait(uids)
        pending = {r.rid: (r, s) for r, (_, s) in zip(batch, looked)}
        while pending:   # nil: the prefetch still runs; ask again
            rids = list(pending)
            answers = self.conn.wait([self.conn.submit("query", rid) for rid in rids])
            for rid, (value, s) in zip(rids, answers):
                r, spent = pending[rid]
                if value is None:
                    pending[rid] = (r, spent + s)
                    continue
                del pending[rid]
                n = len(r.prompt.tokens)
                r.server_hit = min(int(value) * chunk, ((n - 1) // chunk) * chunk)
                stats.lookup_s.append(spent + s)

    def _group_ids(self, gi, blocks, first_block, end_tokens):
        """The ids one group sends for blocks[first_block:]: sliding groups send the null block for
        chunks wholly before the window (of the tokens up to ``end_tokens``)."""
        g = self.model.groups[gi]
        ids = list(blocks)
        if g.kind == "sliding":
            for i in range(len(ids)):
                chunk_end = ((first_block + i) // self.bpc + 1) * self.model.chunk
                if chunk_end <= end_tokens - g.window:
                    ids[i] = NULL
        return ids

    def _retrieve(self, batch, stats):
        block = self.model.block
        todo = []
        for r in batch:
            if r.server_hit <= r.gpu_hit:
                if r.server_hit:    # found but not used: give its read locks back
                    self.conn.wait([self.conn.submit("free_lookup_locks", key(
                        self.model_name, r.prompt.tokens, 0, len(r.prompt.tokens), r.rid, None), 1)])
                continue
            nb = r.server_hit // block
            lists = [self._group_ids(gi, r.blocks[:nb], 0, r.server_hit) for gi in range(len(self.model.groups))]
            if self.kv is not None and self.verify:
                self._poison(r, lists)     # before the clock: verification is not the transfer's time
            todo.append((r, lists))
        if not todo:
            return
        # a request's time runs from its send until its data has landed (the server's event complete), which is what it
        # adds to TTFT: the reply comes as soon as the copies are enqueued, before they finish
        t0 = time.perf_counter()
        uids, sent = [], []
        for r, lists in todo:
            sent.append(time.perf_counter())
            uids.append(self.conn.submit("retrieve", key(self.model_name, r.prompt.tokens, 0, r.server_hit, r.rid),
                                         self.instance, lists, self.kv.event(), r.gpu_hit))
        answers, landed = [], []
        for uid, t_sent in zip(uids, sent):    # one at a time, so an early request's time is not the last reply's
            answers += self.conn.wait([uid])
            self.kv.wait(answers[-1][0][0])
            landed.append(time.perf_counter() - t_sent)
        stats.retrieve_wall_s += time.perf_counter() - t0
        for (r, lists), (value, _), seconds in zip(todo, answers, landed):
            stats.retrieve_s.append(seconds)
            if not value[1]:
                stats.retrieves_failed += 1
                continue
            r.loaded = r.server_hit - r.gpu_hit
            stats.retrieve_bytes += self._bytes(lists, r.gpu_hit // block)
            if self.verify:
                self._check(r, lists, stats)

    def _store(self, batch, stats):
        chunk = self.model.chunk
        t0 = time.perf_counter()
        per_req = []
        for r in batch:
            n = len(r.prompt.tokens)
            first, last = r.server_hit // chunk, n // chunk
            uids, nbytes, sent = [], 0, None
            for c in range(first, last):
                lo = c * self.bpc
                lists = [self._group_ids(gi, r.blocks[lo:lo + self.bpc], lo, n) for gi in range(len(self.model.groups))]
                nbytes += self._bytes(lists, 0)
                sent = sent or time.perf_counter()
                uids.append(self.conn.submit("store", key(self.model_name, r.prompt.tokens, c * chunk, (c + 1) * chunk, r.rid),
                                             self.instance, lists, self.kv.event()))
            per_req.append((uids, nbytes, sent))
        for uids, nbytes, sent in per_req:
            if not uids:
                continue
            for value, _ in self.conn.wait(uids):
                handle, ok = value
                self.kv.wait(handle)
                stats.stores += 1
                stats.stores_failed += 0 if ok else 1
            # from its first chunk's send until its last chunk's data is in the pool (events complete in order per lane)
            stats.store_s.append(time.perf_counter() - sent)
            stats.store_request_bytes.append(nbytes)
            stats.store_bytes += nbytes
        if any(u for u, _, _ in per_req):
            stats.store_wall_s += time.perf_counter() - t0

    # --- bytes and verification ---------------------------------------------------------------

    def _moved(self, g, ids):
        """Indices of the ids a transfer of whole chunks moves for a group: all, but a sub-chunk window's last
        ``window / block`` of each chunk (DeepSeek; hybrid-and-l2.md §A.3.2), and none of a scratch ring."""
        if not g.cacheable:
            return []
        per_chunk, kept = self.bpc, self.model.kept_blocks(g)
        return [i for i in range(len(ids)) if i % per_chunk >= per_chunk - kept]

    def _bytes(self, lists, skip_blocks):
        """Bytes a transfer moves: the non-null blocks past the skipped ones, per group."""
        total = 0
        for gi, ids in enumerate(lists):
            g = self.model.groups[gi]
            per_block = self.model.block_bytes(g)
            if g.recurrent:    # a restore writes only the last snapshot
                total += per_block if len(ids) > skip_blocks and ids[-1] != NULL else 0
            else:
                total += per_block * sum(1 for i in self._moved(g, ids) if i >= skip_blocks and ids[i] != NULL)
        return total

    def _verified(self, r, lists):
        """(group, blocks, hashes) the server must have written: past the GPU hit, non-null; a
        recurrent group gets only its last snapshot, a sub-chunk window its last chunk's window, a
        scratch ring nothing."""
        skip = r.gpu_hit // self.model.block
        for gi, ids in enumerate(lists):
            g = self.model.groups[gi]
            idx = [i for i in self._moved(g, ids) if i >= skip and ids[i] != NULL]
            if g.recurrent:
                idx = idx[-1:]
            elif g.kind == "sliding" and 0 < g.window < self.model.chunk:
                idx = idx[-self.model.kept_blocks(g):]   # a RETRIEVE reads the window group's last chunk only
            yield gi, [ids[i] for i in idx], [r.hashes[i] for i in idx]

    def _poison(self, r, lists):
        """Overwrite the target blocks with another prefix's pattern, so a RETRIEVE that writes
        nothing cannot pass the check."""
        for gi, blocks, hashes in self._verified(r, lists):
            self.kv.fill(gi, blocks, [h ^ 0x5A5A5A5A for h in hashes])

    def _check(self, r, lists, stats):
        for gi, blocks, hashes in self._verified(r, lists):
            stats.verified_blocks += len(blocks)
            stats.verify_mismatches += self.kv.mismatches(gi, blocks, hashes)
