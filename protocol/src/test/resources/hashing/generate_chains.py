#!/usr/bin/env python3
"""Writes chains.json: LMCache's chunk-hash chains worked from their definitions, for TokenHashChainTest.

Run from the repository root (Debian: apt-get install b3sum python3-cbor2):
    /usr/bin/python3 protocol/src/test/resources/hashing/generate_chains.py > protocol/src/test/resources/hashing/chains.json

Definitions followed (the Java code is not consulted):
- blake3: LMCache/LMCache lmcache/v1/multiprocess/token_hasher.py (_make_blake3_hash_func, TokenHasher):
  H(prefix, tokens) = BLAKE3(prefix bytes, or an int prefix as 8 big-endian signed bytes, then
  struct.pack(">%dI", *tokens)), 32 bytes; root = H(0, (0,)); complete chunks only.
- sha256_cbor: vllm-project/vllm vllm/utils/hashing.py: sha256(cbor2.dumps(obj, canonical=True)) of
  (prefix, tuple(tokens), None); root = sha256_cbor(PYTHONHASHSEED string) (init_none_hash in
  vllm/v1/core/kv_cache_utils.py).
BLAKE3 comes from b3sum (the BLAKE3 team's CLI), first checked here against the published vectors in
blake3-published-vectors.txt. The CBOR bytes are assembled by hand from RFC 8949 and must equal
cbor2's canonical output: cbor2 cross-checks them, it is never their only source.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

import cbor2

HERE = os.path.dirname(os.path.abspath(__file__))


def b3(data: bytes) -> bytes:
    out = subprocess.run(["b3sum", "--no-names"], input=data, capture_output=True, check=True).stdout
    return bytes.fromhex(out.decode().strip())


def check_b3sum_against_published():
    with open(os.path.join(HERE, "blake3-published-vectors.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            n, want = line.split()
            got = b3(bytes(i % 251 for i in range(int(n)))).hex()
            assert got == want, f"b3sum disagrees with the published vector for input_len {n}"


def blake3_hash(args):
    """LMCache's blake3_hash, with b3sum for the digest."""
    prefix_hash, tokens, _ = args
    if isinstance(prefix_hash, bytes):
        data = prefix_hash
    elif isinstance(prefix_hash, int):
        data = prefix_hash.to_bytes(8, byteorder="big", signed=True)
    else:
        data = bytes(prefix_hash)
    return b3(data + struct.pack(f">{len(tokens)}I", *tokens))


def cbor_head(major: int, argument: int) -> bytes:
    """RFC 8949 section 3 / 4.2.1: the shortest head for a major type and argument."""
    if argument < 24:
        return bytes([major << 5 | argument])
    for extra, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if argument < 1 << (8 * size):
            return bytes([major << 5 | extra]) + argument.to_bytes(size, "big")
    raise ValueError(argument)


def cbor_by_hand(obj) -> bytes:
    if obj is None:
        return b"\xf6"
    if isinstance(obj, bytes):
        return cbor_head(2, len(obj)) + obj
    if isinstance(obj, str):
        raw = obj.encode("utf-8")
        return cbor_head(3, len(raw)) + raw
    if isinstance(obj, int):
        return cbor_head(0, obj) if obj >= 0 else cbor_head(1, -1 - obj)
    if isinstance(obj, tuple):
        return cbor_head(4, len(obj)) + b"".join(cbor_by_hand(item) for item in obj)
    raise TypeError(type(obj))


def sha256_cbor(obj) -> bytes:
    by_hand = cbor_by_hand(obj)
    assert by_hand == cbor2.dumps(obj, canonical=True), f"hand-made CBOR differs from cbor2 for {obj!r:.80}"
    return hashlib.sha256(by_hand).digest()


def chain(hash_func, root, tokens, chunk_size):
    """TokenHasher.compute_chunk_hashes: complete chunks only."""
    hashes, prefix = [], root
    complete = len(tokens) - len(tokens) % chunk_size
    for i in range(0, complete, chunk_size):
        prefix = hash_func((prefix, tuple(tokens[i:i + chunk_size]), None))
        hashes.append(prefix)
    return hashes


def formula_tokens(spec):
    return [(i * spec["mul"] + spec["add"]) % spec["mod"] for i in range(spec["count"])]


BOUNDARIES = [0, 1, 23, 24, 255, 256, 65535, 65536, 2147483647, 7, 151935, 128000]
SIGNED = [-1, -24, -25, -256, -257, -65536, -65537, -2147483648, 3, 5, 8, 13]


def cases():
    f1024 = {"count": 1024, "mul": 7919, "add": 13, "mod": 151936}
    f64k = {"count": 65536, "mul": 40503, "add": 1, "mod": 200003}
    yield {"name": "blake3, chunk 4, tokens 1..8", "algorithm": "blake3", "chunk_size": 4, "tokens": list(range(1, 9))}
    yield {"name": "blake3, a partial last chunk is not hashed", "algorithm": "blake3", "chunk_size": 4, "tokens": list(range(1, 11))}
    yield {"name": "blake3, boundary token values", "algorithm": "blake3", "chunk_size": 3, "tokens": BOUNDARIES}
    yield {"name": "blake3, chunk 256, 1024 tokens", "algorithm": "blake3", "chunk_size": 256, "tokens_formula": f1024}
    yield {"name": "sha256_cbor seed 0, chunk 4, tokens 1..8", "algorithm": "sha256_cbor", "seed": "0", "chunk_size": 4,
           "tokens": list(range(1, 9))}
    yield {"name": "sha256_cbor seed 0, chunk 256, 1024 tokens", "algorithm": "sha256_cbor", "seed": "0", "chunk_size": 256,
           "tokens_formula": f1024}
    yield {"name": "sha256_cbor seed 42, chunk 24 (two-byte array head), every integer head width, negatives",
           "algorithm": "sha256_cbor", "seed": "42", "chunk_size": 24, "tokens": BOUNDARIES + SIGNED + SIGNED + BOUNDARIES}
    yield {"name": "sha256_cbor seed 4294967295, chunk 23 (one-byte array head)", "algorithm": "sha256_cbor", "seed": "4294967295",
           "chunk_size": 23, "tokens": (BOUNDARIES + SIGNED)[:23] * 2}
    yield {"name": "sha256_cbor seed random (a string like any other for vLLM), chunk 65536 (five-byte array head)",
           "algorithm": "sha256_cbor", "seed": "random", "chunk_size": 65536, "tokens_formula": f64k}
    yield {"name": "sha256_cbor empty seed (os.getenv gives '', not None)", "algorithm": "sha256_cbor", "seed": "", "chunk_size": 2,
           "tokens": [5, 6]}


def main():
    check_b3sum_against_published()
    # the first chunk's CBOR of case 5 spelled out: [h0 as 32 bytes, [1, 2, 3, 4], null]
    root0 = sha256_cbor("0")
    assert cbor_by_hand((root0, (1, 2, 3, 4), None)) == bytes.fromhex("835820") + root0 + bytes.fromhex("8401020304f6")
    assert cbor_by_hand("0") == b"\x61\x30"
    out = []
    for case in cases():
        tokens = case["tokens"] if "tokens" in case else formula_tokens(case["tokens_formula"])
        if case["algorithm"] == "blake3":
            root = blake3_hash((0, (0,), None))
            assert root == b3(bytes(12)), "the root is BLAKE3 of twelve zero bytes"
            hashes = chain(blake3_hash, root, tokens, case["chunk_size"])
        else:
            root = sha256_cbor(case["seed"])
            hashes = chain(sha256_cbor, root, tokens, case["chunk_size"])
        case["root"] = root.hex()
        case["hashes"] = [h.hex() for h in hashes]
        out.append(case)
    # one case a line, so a diff after a change names the case
    sys.stdout.write('{"generator": "protocol/src/test/resources/hashing/generate_chains.py", "cases": [\n')
    sys.stdout.write(",\n".join(json.dumps(case) for case in out))
    sys.stdout.write("\n]}\n")


if __name__ == "__main__":
    main()
