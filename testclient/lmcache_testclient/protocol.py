"""Request builders: one function per operation, payloads in the order LMCache's client sends.

Each returns a ``Request(op, payloads)``; ``wire.Client.call`` encodes every payload as its own
frame. Every declared parameter is sent, defaults included, because the real client does and the
server may count frames (protocol doc §0.4). Signatures follow ``transport/base.py``
(``RequestClient``) of the newest LMCache read, except where noted.
"""

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence, Union

from .messages import (
    ZERO_EVENT,
    BlockAllocationRecord,
    EngineGroupInfo,
    IPCCacheServerKey,
    RegisterEngineDrivenContextPayload,
)
from .ops import Op, op_label


@dataclass(frozen=True)
class Request:
    op: Union[Op, str]
    payloads: tuple = ()

    @property
    def label(self) -> str:
        return op_label(self.op)


def _block_groups(block_ids: Sequence) -> list:
    """``list[list[int]]``, one list per LMCache KV group; a flat list means one group."""
    if block_ids and not isinstance(block_ids[0], (list, tuple)):
        return [list(block_ids)]
    return [list(group) for group in block_ids]


# --- handshake / management -------------------------------------------------------------------

def get_chunk_size() -> Request:
    return Request(Op.GET_CHUNK_SIZE)


def get_experimental() -> Request:
    return Request(Op.GET_EXPERIMENTAL)


def noop() -> Request:
    return Request(Op.NOOP)


def ping(instance_id: Optional[int]) -> Request:
    """Workers ping with their instance id, the scheduler with None."""
    return Request(Op.PING, (instance_id,))


def clear(force: bool = False) -> Request:
    return Request(Op.CLEAR, (force,))


def register_kv_cache(instance_id: int, wrappers: Sequence, model_name: str, world_size: int = 1,
                      engine_type: str = "vllm", layout_hints: Optional[dict] = None,
                      engine_group_infos: Iterable[EngineGroupInfo] = ()) -> Request:
    """7 payload frames (newest layout); ``engine_type`` is the EngineType *value*."""
    return Request(Op.REGISTER_KV_CACHE, (
        instance_id, list(wrappers), model_name, world_size, engine_type,
        dict(layout_hints or {}), list(engine_group_infos)))


def unregister_kv_cache(instance_id: int) -> Request:
    return Request(Op.UNREGISTER_KV_CACHE, (instance_id,))


def report_block_allocation(instance_id: int, model_name: str,
                            records: Iterable[BlockAllocationRecord]) -> Request:
    return Request(Op.REPORT_BLOCK_ALLOCATION, (instance_id, model_name, list(records)))


# --- scheduler side ---------------------------------------------------------------------------

def lookup(key: IPCCacheServerKey, tp_size: int = 1) -> Request:
    """``key.worker_id`` must be None; ``tp_size`` is a legacy field kept for payload arity."""
    return Request(Op.LOOKUP, (key, tp_size))


def query_prefetch_status(request_id: str) -> Request:
    return Request(Op.QUERY_PREFETCH_STATUS, (request_id,))


def free_lookup_locks(key: IPCCacheServerKey, tp_size: int = 1) -> Request:
    return Request(Op.FREE_LOOKUP_LOCKS, (key, tp_size))


# The newest client always sends END_SESSION's optional second argument (SessionEndInfo), whose
# default NO_SESSION_END_INFO goes out as nil; the client that recorded the golden frames sent
# only the request id. The server must accept both.
def end_session(request_id: str, with_end_info: bool = True, end_info: Any = None) -> Request:
    if with_end_info:
        return Request(Op.END_SESSION, (request_id, end_info))
    return Request(Op.END_SESSION, (request_id,))


# --- worker data path (LMCache-driven: the server copies) -------------------------------------

def store(key: IPCCacheServerKey, instance_id: int, block_ids: Sequence,
          event_handle: bytes = ZERO_EVENT) -> Request:
    return Request(Op.STORE, (key, instance_id, _block_groups(block_ids), bytes(event_handle)))


def retrieve(key: IPCCacheServerKey, instance_id: int, block_ids: Sequence,
             event_handle: bytes = ZERO_EVENT, skip_first_n_tokens: int = 0) -> Request:
    return Request(Op.RETRIEVE, (key, instance_id, _block_groups(block_ids), bytes(event_handle),
                                 skip_first_n_tokens))


# --- worker data path (engine-driven: the worker copies into the server's shm pool) -----------

def register_engine_driven_context(payload: RegisterEngineDrivenContextPayload) -> Request:
    return Request(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, (payload,))


def unregister_engine_driven_context(instance_id: int) -> Request:
    return Request(Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, (instance_id,))


def prepare_store(key: IPCCacheServerKey, instance_id: int) -> Request:
    return Request(Op.PREPARE_STORE, (key, instance_id))


def commit_store(key: IPCCacheServerKey, instance_id: int, data: bytes = b"") -> Request:
    """``data`` is b"" on the shm path, a pickled tensor list on the pickle path."""
    return Request(Op.COMMIT_STORE, (key, instance_id, bytes(data)))


def prepare_retrieve(key: IPCCacheServerKey, instance_id: int) -> Request:
    return Request(Op.PREPARE_RETRIEVE, (key, instance_id))


def commit_retrieve(key: IPCCacheServerKey, instance_id: int) -> Request:
    return Request(Op.COMMIT_RETRIEVE, (key, instance_id))
