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
from .shm_kv import Segments

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
    tokens_per_state: int = 1          # DeepSeek V4.1's appended fields (group_view.py)
    cache_role: str = "sparse"
    is_index_group_leader: bool = False
    prefix_cacheable: bool = True

    @property
    def slots_per_block(self) -> int:
        """Physical slots of one block: the shape's block-size dimension (just past the block axis)."""
        return self.shape[self.block_axis + 1] if len(self.shape) == 3 else self.shape[2]

    def info(self) -> EngineGroupInfo:
        return EngineGroupInfo(engine_group_id=self.engine_group_id, layer_indices=tuple(self.layers),
                               tokens_per_block=self.tokens_per_block, sw_size_tokens=self.sw_size_tokens,
                               extra_object_group_tag=0, recurrent_state=self.recurrent_state,
                               tokens_per_state=self.tokens_per_state, cache_role=self.cache_role,
                               is_index_group_leader=self.is_index_group_leader, prefix_cacheable=self.prefix_cacheable)


class HybridKVCache:
    """Every layer's tensor in its own segment; ``groups[g]`` says which layers group g holds."""

    def __init__(self, groups: Sequence[GroupSpec], seed: int):
        self.groups = list(groups)
        count = sum(len(g.layers) for g in self.groups)
        self.names = [None] * count
        self.tensors = [None] * count
        self._segments = Segments()
        gen = torch.Generator().manual_seed(seed)
        try:
            for spec in self.groups:
                for layer in spec.layers:
                    name, tensor = self._segments.tensor(spec.shape, spec.dtype)
                    raw = tensor.view(-1).view(torch.uint8)
                    raw.copy_(torch.randint(0, 256, (raw.numel(),), generator=gen, dtype=torch.uint8))
                    self.names[layer] = name
                    self.tensors[layer] = tensor
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
        self.tensors = []
        self._segments.release()

    def __enter__(self) -> "HybridKVCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

