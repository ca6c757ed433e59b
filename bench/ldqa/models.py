"""Model shapes the replayer registers: kernel groups, their tensors and per-token bytes.

Every group shares the model's ``block`` (tokens per block): vLLM's hybrid allocator unifies the
page size of all groups, and for Mamba/GDN models that unified block is the server's chunk
(hybrid-and-l2.md §A.3.5), so one logical block table per request serves every group here.
"""

from dataclasses import dataclass, replace
from typing import Tuple

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1}


@dataclass(frozen=True)
class Group:
    kind: str            # "full" | "sliding" | "mamba" | "scratch" (DeepSeek-V4.1's compressor ring: never cached)
    layers: int
    heads: int           # KV heads (mamba, MLA: 1)
    head_size: int       # per head (mamba: the state row width; MLA: the record's bytes or elements)
    window: int = -1     # sliding: window in tokens; mamba: the block size (one snapshot per block)
    mla: bool = False    # one latent per slot, [nb, slots, hs] (DeepSeek's sparse-MLA and indexer caches)
    ratio: int = 1       # tokens per slot: a compressed group's block of `block` tokens has block / ratio slots
    dtype: str = ""      # this group's dtype; "" = the model's
    role: str = "sparse"  # EngineGroupInfo.cache_role ("indexer" for DeepSeek's indexer caches)

    @property
    def recurrent(self) -> bool:
        return self.kind == "mamba"

    @property
    def cacheable(self) -> bool:
        return self.kind != "scratch"


@dataclass(frozen=True)
class Model:
    name: str
    block: int           # tokens per block, every group
    chunk: int           # the server's --chunk-size
    dtype: str
    groups: Tuple[Group, ...]

    def layer_ranges(self):
        """(first, count) of each group's layers; layers are numbered group after group."""
        out, first = [], 0
        for g in self.groups:
            out.append((first, g.layers))
            first += g.layers
        return out

    def shape(self, g: Group, num_blocks: int) -> tuple:
        # attention: FlashAttention NHD [2, nb, bs, nh, hs]; Mamba state pages [nb, 2, N, 1, hs]
        # as hybrid_scenarios.hybrid_mamba registers them (block axis first); MLA [nb, slots, hs]
        if g.mla:
            return (num_blocks, self.block // g.ratio, g.head_size)
        if g.recurrent:
            return (num_blocks, 2, self.block, 1, g.head_size)
        return (2, num_blocks, self.block, g.heads, g.head_size)

    @staticmethod
    def block_axis(g: Group) -> int:
        return 0 if g.recurrent or g.mla else 1

    def dtype_of(self, g: Group) -> str:
        return g.dtype or self.dtype

    def block_bytes(self, g: Group) -> int:
        """Bytes of one block of one group, all its layers."""
        if g.mla:
            return g.layers * (self.block // g.ratio) * g.head_size * DTYPE_BYTES[self.dtype_of(g)]
        return g.layers * 2 * self.block * g.heads * g.head_size * DTYPE_BYTES[self.dtype_of(g)]

    def kept_blocks(self, g: Group) -> int:
        """Blocks of a chunk a transfer moves: the last window / block of a sub-chunk window (DeepSeek), else all."""
        per_chunk = self.chunk // self.block
        if g.kind == "sliding" and 0 < g.window < self.chunk:
            return g.window // self.block
        return per_chunk

    def bytes_per_token(self) -> float:
        """Attention bytes per token (what a full prefix costs); Mamba pages count per block too; a scratch ring never."""
        return sum(self.block_bytes(g) for g in self.groups if g.cacheable) / self.block


def _table() -> dict:
    models = [
        # Llama-3.1-8B: 32 layers, 8 KV heads x 128, bf16, vLLM block 16, LMCache chunk 256
        Model("llama-8b", 16, 256, "bfloat16", (Group("full", 32, 8, 128),)),
        # Gemma-3-like: 1 full-attention layer per 5 sliding layers (window 1024 tokens)
        Model("gemma-like", 16, 256, "bfloat16",
              (Group("full", 10, 8, 128), Group("sliding", 50, 8, 128, window=1024))),
        # Qwen3.5/3.6-like GDN hybrid: 1 full-attention layer in 4, unified block N = chunk 544
        Model("qwen-mamba", 544, 544, "bfloat16",
              (Group("full", 16, 4, 256), Group("mamba", 48, 1, 128, window=544))),
        # DeepSeek-V4-Flash-like (recipes/deepseek_v4_flash.rst, hybrid-and-l2.md §A.2.3): 43 layers of fp8_ds_mla records
        # (584 bytes a token, uint8) with a 128-token sliding window each, ratio-4 latents with a float32 indexer on half of
        # them, ratio-128 latents on the other half, and V4.1's compressor scratch ring (never cached). Every group pages
        # 128 tokens a block here (one block table per request, as the replayer keeps); the window of one block is smaller
        # than the 256-token chunk, so each chunk keeps its last block of the window groups
        Model("deepseek-v4-like", 128, 256, "uint8",
              (Group("sliding", 43, 1, 584, window=128, mla=True),
               Group("full", 21, 1, 584, mla=True, ratio=4),
               Group("full", 21, 1, 128, mla=True, ratio=4, dtype="float32", role="indexer"),
               Group("full", 22, 1, 584, mla=True, ratio=128),
               Group("scratch", 21, 1, 512, mla=True, ratio=4, dtype="float32"))),
        # CI shapes: small enough for a 2-core machine, same structure
        Model("tiny", 16, 256, "bfloat16", (Group("full", 2, 2, 64),)),
        Model("tiny-sliding", 16, 256, "bfloat16",
              (Group("full", 1, 2, 64), Group("sliding", 2, 2, 64, window=512))),
        Model("tiny-mamba", 64, 64, "bfloat16",
              (Group("full", 1, 2, 64), Group("mamba", 2, 1, 32, window=64))),
        Model("tiny-deepseek", 128, 256, "uint8",
              (Group("sliding", 2, 1, 584, window=128, mla=True), Group("full", 1, 1, 584, mla=True, ratio=4),
               Group("full", 1, 1, 32, mla=True, ratio=4, dtype="float32", role="indexer"),
               Group("full", 1, 1, 584, mla=True, ratio=128), Group("scratch", 1, 1, 64, mla=True, ratio=4, dtype="float32"))),
    ]
    return {m.name: m for m in models}


MODELS = _table()


def resolve(args) -> Model:
    """The table's model, with explicit shape flags applied to a single-group model."""
    model = MODELS[args.model]
    if args.chunk_size:
        model = replace(model, chunk=args.chunk_size)
        if any(g.recurrent for g in model.groups):   # Mamba: the chunk is the unified block
            model = replace(model, block=args.chunk_size,
                            groups=tuple(replace(g, window=args.chunk_size) if g.recurrent else g
                                         for g in model.groups))
    if args.block_size:
        model = replace(model, block=args.block_size)
    if args.dtype:
        model = replace(model, dtype=args.dtype)
    if args.layers or args.kv_heads or args.head_size:
        if len(model.groups) != 1:
            raise SystemExit("--layers/--kv-heads/--head-size apply to single-group models only")
        g = model.groups[0]
        model = replace(model, name=model.name + "*", groups=(replace(
            g, layers=args.layers or g.layers, heads=args.kv_heads or g.heads,
            head_size=args.head_size or g.head_size),))
    if model.chunk % model.block:
        raise SystemExit(f"chunk {model.chunk} is not a multiple of the block {model.block}")
    return model
