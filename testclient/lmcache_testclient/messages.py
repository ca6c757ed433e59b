"""Message types that LMCache msgpack-encodes (not pickles), mirrored field for field.

msgspec encodes a ``@dataclass`` and a ``msgspec.Struct`` alike as a map keyed by field name with
*every* field, defaults included, in declaration order; so the declaration order below is part
of the wire format. LMCache uses a dataclass for the key and the allocation record, and a
Struct for the engine-group and engine-driven types; we keep the same kinds.
"""

from dataclasses import dataclass
from typing import Any, Optional

import msgspec

# CPU workers send (and expect back) an all-zero 64-byte "event handle": their torch_dev stub has
# no IPC events (protocol doc §7.1). CUDA workers send cudaIpcEventHandle_t bytes instead.
ZERO_EVENT = bytes(64)


@dataclass(frozen=True)
class IPCCacheServerKey:
    """``lmcache.v1.multiprocess.custom_types.IPCCacheServerKey`` (protocol doc §5).

    ``token_ids`` is the whole request's token list; ``[start, end)`` the range meant.
    ``worker_id`` is the KV rank for STORE/RETRIEVE and None for LOOKUP/FREE_LOOKUP_LOCKS.
    """

    model_name: str
    world_size: int
    worker_id: Optional[int]
    token_ids: tuple
    start: int
    end: int
    request_id: str
    cache_salt: str = ""
    request_configs: Optional[dict] = None
    num_kv_readers: int = 0

    def __post_init__(self):
        # LMCache stores a tuple (hashable, frozen); msgspec writes it as an array either way.
        object.__setattr__(self, "token_ids", tuple(self.token_ids))

    def with_(self, **changes) -> "IPCCacheServerKey":
        """A copy with some fields changed (e.g. ``worker_id=None`` for the lookup form)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return IPCCacheServerKey(**values)


class EngineGroupInfo(msgspec.Struct, frozen=True):
    """One kernel group of a hybrid model (``group_view.py``; hybrid-and-l2.md §A.2.2); [] means a
    single group. The six core fields in LMCache's order, then the DeepSeek V4.1 fields LMCache
    appended last (all defaulted); msgspec writes every one, defaults (and None) too."""

    engine_group_id: int
    layer_indices: tuple = ()
    tokens_per_block: int = 0          # 0: the tensor's block size
    sw_size_tokens: int = -1           # -1: full attention; Mamba/GDN groups send the block size
    extra_object_group_tag: int = 0    # >0: a connector-private (CacheBlend aux) group
    recurrent_state: bool = False      # Mamba/GDN state snapshots, not attention KV
    # DeepSeek V4.1 metadata (group_view.py's "phase-1 freeze contract": appended last, all defaulted)
    tokens_per_state: int = 1
    cache_role: str = "sparse"         # "sparse" | "indexer"
    state_content_bytes: Optional[int] = None
    block_stride_alignment: Optional[int] = None
    is_index_group_leader: bool = False
    prefix_cacheable: bool = True      # False: a per-request scratch ring, never cached
    page_size_padded: Optional[int] = None
    num_head_slots: Optional[int] = None


@dataclass
class BlockAllocationRecord:
    """Per-request block allocation delta, sent by the scheduler in REPORT_BLOCK_ALLOCATION."""

    req_id: str
    new_block_ids: list
    new_token_ids: list


class RegisterEngineDrivenContextPayload(msgspec.Struct):
    """The single payload of REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT (protocol doc §7.3 item 2).

    Always all 9 keys in this order; ``num_physical_slots=None`` is the legacy "chunk_size slots"
    form. ``use_mla`` really means "single plane" (MLA or fused K/V).
    """

    instance_id: int
    model_name: str
    world_size: int
    block_size: int
    num_layers: int
    hidden_dim_size: int
    dtype_str: str
    use_mla: bool
    num_physical_slots: Optional[int] = None


def field_values(obj: Any) -> dict:
    """Field name → value, in declaration order, for any of the types above."""
    if isinstance(obj, msgspec.Struct):
        return {name: getattr(obj, name) for name in obj.__struct_fields__}
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
