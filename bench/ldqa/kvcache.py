"""The simulated worker's KV tensors (CPU: POSIX shm like LMCache's CPU client; CUDA: device
memory shared by IPC handles like vLLM's worker), filled with a pattern per block so that a
retrieved block can be checked byte for byte against what was stored.

A block's pattern is a fixed random template plus a byte derived from the block's prefix hash and
the layer: the same prefix always has the same bytes (whichever GPU block holds it), a block moved
to the wrong place or position within a block shows up.
"""

import time

import torch

from .models import Group, Model

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
                "uint8": torch.uint8}
ZERO_EVENT = bytes(64)   # CPU workers send (and get back) an all-zero event handle


def pattern_byte(h: int, layer: int) -> int:
    return ((h * 2654435761 + layer * 40503) >> 7) % 255 + 1


class KVCache:
    """Tensors in layer order; ``group_layers[g]`` lists group g's layer indices."""

    device = "cpu"

    def __init__(self, model: Model, num_blocks: int, seed: int):
        self.model, self.num_blocks = model, num_blocks
        self.tensors, self.group_layers = [], []
        gen = torch.Generator().manual_seed(seed)
        self.templates = []
        for g, (first, count) in zip(model.groups, model.layer_ranges()):
            shape = model.shape(g, num_blocks)
            self.group_layers.append(list(range(first, first + count)))
            for _ in range(count):
                self.tensors.append(self._alloc(shape, TORCH_DTYPES[model.dtype_of(g)]))
            block_shape = list(self._u8(self.tensors[-1]).shape)
            del block_shape[model.block_axis(g)]
            self.templates.append(torch.randint(0, 256, block_shape, generator=gen, dtype=torch.uint8).to(self.device))

    # --- backend hooks ---

    def _alloc(self, shape, dtype):
        raise NotImplementedError

    def wrappers(self) -> list:
        raise NotImplementedError

    def event(self) -> bytes:
        return ZERO_EVENT

    def wait(self, handle) -> None:
        pass

    def sync(self) -> None:
        pass

    # --- patterns ---

    @staticmethod
    def _u8(t):
        return t.view(torch.uint8)

    def _expected(self, gi: int, layer: int, hashes) -> torch.Tensor:
        g: Group = self.model.groups[gi]
        axis = self.model.block_axis(g)
        ks = torch.tensor([pattern_byte(h, layer) for h in hashes], dtype=torch.uint8, device=self.device)
        view = [1] * (self.templates[gi].dim() + 1)
        view[axis] = len(hashes)
        return self.templates[gi].unsqueeze(axis) + ks.view(view)     # uint8: wraps mod 256

    def fill(self, gi: int, blocks, hashes) -> None:
        """Writes the pattern of each block's prefix hash into the group's blocks (a prefill)."""
        if not blocks:
            return
        axis = self.model.block_axis(self.model.groups[gi])
        ids = torch.tensor(blocks, dtype=torch.long, device=self.device)
        for layer in self.group_layers[gi]:
            self._u8(self.tensors[layer]).index_copy_(axis, ids, self._expected(gi, layer, hashes))

    def mismatches(self, gi: int, blocks, hashes) -> int:
        """How many of the blocks differ from their pattern in any layer."""
        if not blocks:
            return 0
        axis = self.model.block_axis(self.model.groups[gi])
        ids = torch.tensor(blocks, dtype=torch.long, device=self.device)
        bad = torch.zeros(len(blocks), dtype=torch.bool, device=self.device)
        for layer in self.group_layers[gi]:
            got = self._u8(self.tensors[layer]).index_select(axis, ids)
            diff = got != self._expected(gi, layer, hashes)
            bad |= diff.movedim(axis, 0).reshape(len(blocks), -1).any(dim=1)
        return int(bad.sum())

    def raw_copy_gbps(self, nbytes: int) -> dict:
        """memcpy between two host buffers of at least 64 MiB (a few MiB gave 2.8 to 91 GB/s from one run to the next:
        cache effects and timer resolution), both written first, best of 5: the CPU's copy ceiling."""
        nbytes = max(nbytes, 64 << 20)
        a = torch.empty(nbytes, dtype=torch.uint8)
        b = torch.empty(nbytes, dtype=torch.uint8)
        a.fill_(1)
        b.fill_(2)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            b.copy_(a)
            best = min(best, time.perf_counter() - t0)
        gbps = nbytes / best / 1e9
        return {"raw_bytes": nbytes, "raw_store_gbps": gbps, "raw_retrieve_gbps": gbps, "raw_kind": "memcpy host->host"}

    def close(self) -> None:
        pass


class ShmKVCache(KVCache):
    """Each layer's tensor in its own /dev/shm segment, shared as LMCache's CpuShmTensorWrapper."""

    def __init__(self, model, num_blocks, seed):
        from lmcache_testclient.shm_kv import Segments
        self._segments = Segments()
        self.names = self._segments.names
        try:
            super().__init__(model, num_blocks, seed)
        except BaseException:
            self.close()
            raise

    def _alloc(self, shape, dtype):
        return self._segments.tensor(tuple(shape), dtype)[1]

    def wrappers(self) -> list:
        from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper
        return [CpuShmTensorWrapper.from_tensor(t, n) for t, n in zip(self.tensors, self.names)]

    def close(self) -> None:
        self.tensors, self.templates = [], []
        self._segments.release()


class CudaKVCache(KVCache):
    """Device tensors shared with real ``_share_cuda_()`` handles; STORE/RETRIEVE carry
    interprocess events, as testclient/gpu/gpu_check.py's Worker (what vLLM's worker does)."""

    device = "cuda"

    def __init__(self, model, num_blocks, seed):
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch.cuda is not available on this host "
                             "(use --device cpu, or run on a GPU host with CUDA torch)")
        self._keep = []
        super().__init__(model, num_blocks, seed)

    def _alloc(self, shape, dtype):
        return torch.zeros(shape, dtype=dtype, device="cuda")

    def wrappers(self) -> list:
        from lmcache.v1.platform.cuda.ipc_wrapper import CudaIPCWrapper
        uuid = str(torch.cuda.get_device_properties(self.tensors[0].device).uuid)
        return [CudaIPCWrapper(handle=t.untyped_storage()._share_cuda_(), dtype=t.dtype, shape=t.shape,
                               stride=t.stride(), storage_offset=t.storage_offset(), device_uuid=uuid)
                for t in self.tensors]

    def event(self) -> bytes:
        # the server waits on this before copying: our fills (prefill) are then visible to it
        ev = torch.cuda.Event(interprocess=True)
        ev.record()
        self._keep.append(ev)
        if len(self._keep) > 4096:
            self._keep = self._keep[-1024:]
        return bytes(ev.ipc_handle())

    def wait(self, handle) -> None:
        ev = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes(handle))
        ev.synchronize()

    def sync(self) -> None:
        torch.cuda.synchronize()

    def raw_copy_gbps(self, nbytes: int) -> dict:
        """Pinned D2H (what a STORE moves) and H2D (a RETRIEVE) of the same bytes, best of 3."""
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        out = {"raw_bytes": nbytes, "raw_kind": "pinned D2H / H2D"}
        for name, fn in (("raw_store_gbps", lambda: host.copy_(dev, non_blocking=True)),
                         ("raw_retrieve_gbps", lambda: dev.copy_(host, non_blocking=True))):
            best = float("inf")
            for _ in range(3):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) / 1000)
            out[name] = nbytes / best / 1e9
        return out
