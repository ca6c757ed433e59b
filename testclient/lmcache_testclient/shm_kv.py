"""vLLM-shaped KV-cache tensors in POSIX shared memory, shared the way LMCache's CPU client does.

LMCache's CPU worker moves each KV tensor's storage into a segment ``/lmcache_kv_<pid>_<n>`` and
sends a pickled ``CpuShmTensorWrapper`` (name, nbytes, dtype, shape, stride, storage_offset); the
server maps the same pages and copies blocks in and out (protocol doc §7.1). We allocate the
tensors in the segments directly, so every write the server makes is visible here at once.

A ``Layout`` knows its shape and which axes are "block" and "token"; from that the helpers find
the bytes of block b (and of token t in block b) in every tensor, for any layout.
"""

import atexit
import itertools
import math
import mmap
import os
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper

SHM_DIR = "/dev/shm"   # where Linux's shm_open(3) keeps "/name"; the Java server maps it there too
BLOCK_SIZE = 16        # vLLM's default tokens per block; the chunk size must be a multiple of it


@dataclass(frozen=True)
class Geometry:
    num_blocks: int
    num_layers: int = 2
    block_size: int = BLOCK_SIZE
    num_heads: int = 2            # KV heads
    head_size: int = 64
    mla_head_size: int = 576      # MLA latent width (kv_lora_rank + rope dim, as DeepSeek-V2)
    dtype: torch.dtype = torch.bfloat16


@dataclass(frozen=True)
class Layout:
    name: str
    description: str
    layout_hints: dict            # what vLLM's adapter sends next to the wrappers
    cross_layer: bool             # one tensor holds every layer (one wrapper in the list)
    block_axis: int
    token_axis: int               # in the full tensor
    shape: Callable[[Geometry], tuple]


def _layouts() -> dict:
    nb = lambda g: g.num_blocks  # noqa: E731  (keeps the shape lambdas one line each)
    table = [
        Layout("nhd", "FlashAttention [2, nb, bs, nh, hs]", {"kv_layout": "NHD"}, False, 1, 2,
               lambda g: (2, nb(g), g.block_size, g.num_heads, g.head_size)),
        Layout("hnd", "FlashAttention HND [2, nb, nh, bs, hs]", {"kv_layout": "HND"}, False, 1, 3,
               lambda g: (2, nb(g), g.num_heads, g.block_size, g.head_size)),
        Layout("flashinfer", "FlashInfer [nb, 2, bs, nh, hs]", {"kv_layout": "NHD"}, False, 0, 2,
               lambda g: (nb(g), 2, g.block_size, g.num_heads, g.head_size)),
        Layout("fused", "fused K/V [nb, bs, nh, 2*hs]", {"kv_layout": "NHD"}, False, 0, 1,
               lambda g: (nb(g), g.block_size, g.num_heads, 2 * g.head_size)),
        Layout("fused-hnd", "fused K/V HND [nb, nh, bs, 2*hs]", {"kv_layout": "HND"}, False, 0, 2,
               lambda g: (nb(g), g.num_heads, g.block_size, 2 * g.head_size)),
        # vLLM sends {} when it cannot name a layout; the golden MLA registration has {} too.
        Layout("mla", "MLA [nb, bs, hs]", {}, False, 0, 1,
               lambda g: (nb(g), g.block_size, g.mla_head_size)),
        Layout("crosslayer", "cross-layer [nb, nl, 2, bs, nh, hs]", {"kv_layout": "NHD"}, True, 0, 3,
               lambda g: (nb(g), g.num_layers, 2, g.block_size, g.num_heads, g.head_size)),
    ]
    return {layout.name: layout for layout in table}


LAYOUTS = _layouts()

# --- segment bookkeeping: every segment we create is unlinked at exit, whatever happened ------

_counter = itertools.count()
_live: set = set()
_live_lock = threading.Lock()


def new_segment_name() -> str:
    return f"/lmcache_kv_{os.getpid()}_{next(_counter)}"


def _path(shm_name: str) -> str:
    return os.path.join(SHM_DIR, shm_name.lstrip("/"))


def unlink_segment(shm_name: str) -> None:
    with _live_lock:
        _live.discard(shm_name)
    try:
        os.unlink(_path(shm_name))
    except FileNotFoundError:
        pass


@atexit.register
def unlink_all_segments() -> None:
    with _live_lock:
        names = list(_live)
    for name in names:
        unlink_segment(name)


def _create_segment(shm_name: str, nbytes: int) -> mmap.mmap:
    fd = os.open(_path(shm_name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    with _live_lock:
        _live.add(shm_name)
    try:
        os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


# --- the KV cache ------------------------------------------------------------------------------

SENTINEL = -3.5  # fill value for "must stay untouched" blocks; random data never takes it


class Segments:
    """POSIX shm segments this process made, each mapped here with a tensor over it: what a CPU worker registers.
    ``release`` unlinks every name and closes the mappings (a mapping that a view still exports closes with it)."""

    def __init__(self):
        self.names: list = []
        self._maps: list = []

    def tensor(self, shape: tuple, dtype: torch.dtype):
        """A new segment of exactly ``shape`` x ``dtype``: (its name, a tensor of that shape over it)."""
        name = new_segment_name()
        mapping = _create_segment(name, math.prod(shape) * torch.empty((), dtype=dtype).element_size())
        self.names.append(name)
        self._maps.append(mapping)
        return name, torch.frombuffer(mapping, dtype=torch.uint8).view(dtype).view(shape)

    def release(self) -> None:
        """Unlink every segment; call it after dropping the tensors (the mappings close once no view exports them)."""
        for name in self.names:
            unlink_segment(name)
        for mapping in self._maps:
            try:
                mapping.close()
            except BufferError:  # a view handed out earlier still exports the buffer
                pass
        self._maps = []


class ShmKVCache:
    """The KV tensors of one simulated vLLM worker, each in its own shm segment."""

    def __init__(self, layout: Layout, geometry: Geometry, seed: int):
        self.layout = layout
        self.geometry = geometry
        shape = layout.shape(geometry)
        count = 1 if layout.cross_layer else geometry.num_layers
        self._segments = Segments()
        self.names: list = self._segments.names
        self.tensors: list = []
        try:
            for _ in range(count):
                self.tensors.append(self._segments.tensor(shape, geometry.dtype)[1])
            self.fill_random(seed)
        except BaseException:
            self.close()
            raise

    # --- what goes on the wire ---

    def wrappers(self) -> list:
        return [CpuShmTensorWrapper.from_tensor(t, n) for t, n in zip(self.tensors, self.names)]

    @property
    def layout_hints(self) -> dict:
        return dict(self.layout.layout_hints)

    # --- contents ---

    def fill_random(self, seed: int) -> None:
        """Seeded values in ±[0.5, 2): never zero, never the sentinel."""
        gen = torch.Generator().manual_seed(seed)
        for t in self.tensors:
            magnitude = torch.rand(t.shape, generator=gen) * 1.5 + 0.5
            sign = torch.randint(0, 2, t.shape, generator=gen) * 2 - 1
            t.copy_((magnitude * sign).to(t.dtype))

    def block_views(self, block: int) -> list:
        """Block ``block`` of every tensor (views into shared memory)."""
        return [t.select(self.layout.block_axis, block) for t in self.tensors]

    def token_views(self, block: int, token: int) -> list:
        """Token ``token`` (0..block_size-1) of block ``block`` of every tensor."""
        axis = self.layout.token_axis - (1 if self.layout.token_axis > self.layout.block_axis else 0)
        return [v.select(axis, token) for v in self.block_views(block)]

    def block_bytes(self, block: int) -> bytes:
        return b"".join(_raw(v) for v in self.block_views(block))

    def token_bytes(self, block: int, token: int) -> bytes:
        return b"".join(_raw(v) for v in self.token_views(block, token))

    def snapshot(self, blocks: Sequence[int]) -> list:
        return [self.block_bytes(b) for b in blocks]

    def fill_blocks(self, blocks: Sequence[int], value: float) -> None:
        for b in blocks:
            for v in self.block_views(b):
                v.fill_(value)

    def zero_blocks(self, blocks: Sequence[int]) -> None:
        self.fill_blocks(blocks, 0.0)

    def block_is_filled_with(self, block: int, value: float) -> bool:
        return all(bool((v == value).all()) for v in self.block_views(block))

    def block_byte_ranges(self, block: int) -> list:
        """``(shm_name, byte_offset, length)`` runs that make up block ``block`` in the segments:
        where a server must read or write it (for debugging a server's layout handling)."""
        return self._byte_ranges(lambda idx: idx.select(self.layout.block_axis, block))

    def token_byte_ranges(self, block: int, token: int) -> list:
        axis = self.layout.token_axis - (1 if self.layout.token_axis > self.layout.block_axis else 0)
        return self._byte_ranges(
            lambda idx: idx.select(self.layout.block_axis, block).select(axis, token))

    def _byte_ranges(self, pick) -> list:
        elem = self.tensors[0].element_size()
        ranges = []
        for name, t in zip(self.names, self.tensors):
            offsets = pick(torch.arange(t.numel(), dtype=torch.int64).view(t.shape)).flatten().tolist()
            start = prev = offsets[0]
            for off in offsets[1:] + [None]:
                if off != prev + 1:
                    ranges.append((name, start * elem, (prev - start + 1) * elem))
                    start = off
                prev = off
        return ranges

    # --- lifetime ---

    def unlink(self, index: int = 0) -> str:
        """Remove one segment's name (the mapping here stays valid), as a dying client would."""
        unlink_segment(self.names[index])
        return self.names[index]

    def close(self) -> None:
        """Unlink every segment. The local mappings are released when the tensors are gone."""
        self.tensors = []
        self._segments.release()

    def __enter__(self) -> "ShmKVCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _raw(view: torch.Tensor) -> bytes:
    return view.contiguous().view(torch.uint8).numpy().tobytes()
