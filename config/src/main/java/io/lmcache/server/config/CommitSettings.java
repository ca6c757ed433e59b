package io.lmcache.server.config;

import java.util.List;
import java.util.TreeSet;

/**
 * LMCache's window commit at a turn boundary (design "Sliding-window commits: {@code --commit-policy}", stored text id
 * 69066784989; the policy and anchor rules in {@code lmcache/v1/multiprocess/commit_policy.py}, tested by
 * {@code tests/v1/multiprocess/test_commit_policy.py}, stored id 68892730332): whether END_SESSION copies a finished request's
 * last window to L2, and where that window ends. {@code never} (the default) keeps the previous behaviour exactly.
 *
 * @param boundaryTokens the stop tokens {@code stop_token} accepts at {@code generation_end}, sorted; empty: any stop token
 */
public record CommitSettings(Policy policy, Anchor anchor, List<Integer> boundaryTokens) {
    /** At most this many boundary tokens: a turn ends on a handful of marker tokens, not thousands. */
    static final int MAX_BOUNDARY_TOKENS = 64;

    public static final CommitSettings NEVER = new CommitSettings(Policy.NEVER, Anchor.GENERATION_END, List.of());

    public CommitSettings {
        boundaryTokens = List.copyOf(boundaryTokens);
    }

    /** {@code --commit-policy}: LMCache's built-in names. */
    public enum Policy {
        NEVER("never"), STOP_TOKEN("stop_token");

        private final String flagValue;

        Policy(String flagValue) {
            this.flagValue = flagValue;
        }

        public String flagValue() {
            return flagValue;
        }
    }

    /** {@code --commit-anchor}: the window ends at the last chunk the request stored, or at the end of its looked-up prompt. */
    public enum Anchor {
        GENERATION_END("generation_end"), PROMPT_END("prompt_end");

        private final String flagValue;

        Anchor(String flagValue) {
            this.flagValue = flagValue;
        }

        public String flagValue() {
            return flagValue;
        }
    }

    public boolean enabled() {
        return policy != Policy.NEVER;
    }

    static CommitSettings validate(String policy, String anchor, List<String> boundaryTokens) throws ConfigException {
        Policy p = switch (policy.strip()) {
            case "never" -> Policy.NEVER;
            case "stop_token" -> Policy.STOP_TOKEN;
            default -> throw new ConfigException("--commit-policy", "must be never or stop_token, got '" + policy + "'");
        };
        Anchor a = switch (anchor.strip()) {
            case "generation_end" -> Anchor.GENERATION_END;
            case "prompt_end" -> Anchor.PROMPT_END;
            default -> throw new ConfigException("--commit-anchor", "must be generation_end or prompt_end, got '" + anchor + "'");
        };
        TreeSet<Integer> tokens = new TreeSet<>();
        for (String text : boundaryTokens == null ? List.<String>of() : boundaryTokens) {
            if (text.isBlank()) {
                continue;
            }
            try {
                int token = Integer.parseInt(text.strip());
                if (token < 0) {
                    throw new ConfigException("--commit-boundary-tokens", "token ids are not negative, got " + token);
                }
                tokens.add(token);
            } catch (NumberFormatException e) {
                throw new ConfigException("--commit-boundary-tokens", "must be token ids, got '" + text + "'");
            }
        }
        if (tokens.size() > MAX_BOUNDARY_TOKENS) {
            throw new ConfigException("--commit-boundary-tokens", "at most " + MAX_BOUNDARY_TOKENS + " tokens, got " + tokens.size());
        }
        return new CommitSettings(p, a, List.copyOf(tokens));
    }
}
