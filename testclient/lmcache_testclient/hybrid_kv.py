"""KV tensors of a hybrid model in POSIX shared memory: several kernel groups, each with its own
shape, block size and dtype, as vLLM's hybrid KV-cache manager registers them (one tensor per
layer, in layer order) through LMCache's CPU client. Bytes are handled through a uint8 view, so
fp8/uint8 groups are opaque bytes like any other.
"""

from dataclasses import dataclass
from typing import Sequence

import torch

from lmcache.v1.platform.cpu.shm import CpuShmTensorWrapper

from .messages import EngineGroupInfo
from .shm_kv import _create_segment, new_segment_name, unlink_segment

SENTINEL_BYTE = 0xA5  # fills "must stay untouched" blocks; random data never fills a whole block with it


@dataclass(frozen=True)
class GroupSpec:
    """One kernel group: its layers' tensor shape (block axis first or second), dtype and info fields."""
    layers: Sequence[int]          # registered tensor indices (layer order of the model)
    shape: tuple
    dtype: torch.dtype
    block_axis: int
    tokens_per_block: int
    sw_size_tokens: int = -1
    recurrent_state: bool = False
    engine_group_id: int = 0

    def info(self) -> EngineGroupInfo:
        return EngineGroupInfo(engine_group_id=self.engine_group_id, layer_indices=tuple(self.layers),
                               tokens_per_block=self.tokens_per_block, sw_size_tokens=self.sw_size_tokens,
                               extra_object_group_tag=0, recurrent_state=self.recurrent_state)


class HybridKVCache:
    """Every layer's tensor in its own segment; ``groups[g]`` says which layers group g holds."""

    def __init__(self, groups: Sequence[GroupSpec], seed: int):
        self.groups = list(groups)
        count = sum(len(g.layers) for g in self.groups)
        self.names = [None] * count
        self.tensors = [None] * count
        self._maps = []
        gen = torch.Generator().manual_seed(seed)
        try:
            for spec in self.groups:
                for layer in spec.layers:
                    name = new_segment_name()
                    nbytes = _numel(spec.shape) * torch.empty((), dtype=spec.dtype).element_size()
                    mapping = _create_segment(name, nbytes)
                    self._maps.append(mapping)
                    raw = torch.frombuffer(mapping, dtype=torch.uint8)
                    raw.copy_(torch.randint(0, 256, (nbytes,), generator=gen, dtype=torch.uint8))
                    self.names[layer] = name
                    self.tensors[layer] = raw.view(spec.dtype).view(spec.shape)
        except BaseException:
            self.close()
            raise

    def wrappers(self) -> list:
        return [CpuShmTensorWrapper.from_tensor(t, n) for t, n in zip(self.tensors, self.names)]

    def infos(self) -> list:
        return [g.info() for g in self.groups]

    def _views(self, g: int, block: int) -> list:
        spec = self.groups[g]
        return [self.tensors[layer].view(torch.uint8).select(spec.block_axis, block) for layer in spec.layers]

    def block_bytes(self, g: int, block: int) -> bytes:
        return b"".join(v.contiguous().numpy().tobytes() for v in self._views(g, block))

    def snapshot(self, g: int, blocks: Sequence[int]) -> list:
        return [self.block_bytes(g, b) for b in blocks]

    def fill(self, g: int, blocks: Sequence[int], byte: int) -> None:
        for b in blocks:
            for v in self._views(g, b):
                v.fill_(byte)

    def filled_with(self, g: int, block: int, byte: int) -> bool:
        return all(bool((v == byte).all()) for v in self._views(g, block))

    def close(self) -> None:
        for name in self.names:
            if name:
                unlink_segment(name)
        self.tensors = []
        for mapping in self._maps:
            try:
                mapping.close()
            except BufferError:
                pass
        self._maps = []

    def __enter__(self) -> "HybridKVCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
