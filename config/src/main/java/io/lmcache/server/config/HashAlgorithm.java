package io.lmcache.server.config;

import java.util.Map;

/**
 * {@code --hash-algorithm}: the chunk-hash chain, which must be the same on every server that
 * shares a cache with this one (LMCache's {@code TokenHasher}, {@code lmcache/v1/multiprocess/token_hasher.py}).
 * LMCache's names are taken exactly: there any other spelling falls back to Python's builtin hash.
 */
public sealed interface HashAlgorithm {
    /** The variable vLLM's {@code init_none_hash} roots the {@code sha256_cbor} chain at. */
    String ENV_PYTHON_HASH_SEED = "PYTHONHASHSEED";

    /** The flag's value, as {@code /config} shows it. */
    String flagValue();

    /** LMCache's default: BLAKE3 over the prefix hash and big-endian uint32 tokens, from a fixed root. */
    record Blake3() implements HashAlgorithm {
        @Override
        public String flagValue() {
            return "blake3";
        }
    }

    /**
     * vLLM's {@code sha256_cbor}, rooted at {@code sha256_cbor(PYTHONHASHSEED)}.
     *
     * @param pythonHashSeed the variable's value exactly as Python's {@code os.getenv} gives it (never stripped)
     */
    record Sha256Cbor(String pythonHashSeed) implements HashAlgorithm {
        @Override
        public String flagValue() {
            return "sha256_cbor";
        }
    }

    /** The algorithm the flag names; {@code env} supplies {@code PYTHONHASHSEED}. */
    static HashAlgorithm validate(String flag, Map<String, String> env) throws ConfigException {
        String name = flag.strip();
        return switch (name) {
            case "blake3" -> new Blake3();
            case "sha256_cbor" -> {
                String seed = env.get(ENV_PYTHON_HASH_SEED);
                if (seed == null) {
                    throw new ConfigException("--hash-algorithm", "sha256_cbor needs PYTHONHASHSEED set to the value every vLLM and LMCache"
                            + " process of the fleet has: without it vLLM roots the chain at random bytes and nothing is shared");
                }
                yield new Sha256Cbor(seed);
            }
            case "builtin" -> throw new ConfigException("--hash-algorithm", "builtin (Python's hash()) exists only inside one Python"
                    + " process, so no other server could share its keys; use blake3 (LMCache's default) or sha256_cbor");
            default -> throw new ConfigException("--hash-algorithm", "must be blake3 or sha256_cbor, got '" + flag + "'");
        };
    }
}
