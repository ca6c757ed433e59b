package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.CommitSettings;
import io.lmcache.server.config.CommitSettings.Anchor;
import io.lmcache.server.config.CommitSettings.Policy;
import io.lmcache.server.protocol.Request.SessionEndInfo;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The commit rule and the anchor, case for case as LMCache's {@code tests/v1/multiprocess/test_commit_policy.py} (stored id 68892730332). */
class WindowCommitTest {
    private static final int IM_END = 151645;
    private static final CommitSettings BOUNDARY = new CommitSettings(Policy.STOP_TOKEN, Anchor.GENERATION_END, List.of(IM_END));
    private static final CommitSettings ANY = new CommitSettings(Policy.STOP_TOKEN, Anchor.GENERATION_END, List.of());
    private static final CommitSettings PROMPT = new CommitSettings(Policy.STOP_TOKEN, Anchor.PROMPT_END, List.of(IM_END));

    private static SessionEndInfo info(String reason, long token) {
        return new SessionEndInfo(reason, token);
    }

    @Test
    void stopTokenCommitsOnlyACleanStopOnABoundaryToken() {
        assertTrue(WindowCommit.shouldCommit(BOUNDARY, info("stop", IM_END), 16));
        assertFalse(WindowCommit.shouldCommit(BOUNDARY, info("stop", 99), 16), "another stop token is no turn boundary");
        assertTrue(WindowCommit.shouldCommit(ANY, info("stop", 99), 16), "no boundary tokens: any clean stop");
        for (String reason : List.of("abort", "length", "error", "repetition", "")) {
            assertFalse(WindowCommit.shouldCommit(BOUNDARY, info(reason, IM_END), 16), reason);
        }
        assertFalse(WindowCommit.shouldCommit(BOUNDARY, info("stop", IM_END), 0), "nothing stored, nothing to commit");
        assertFalse(WindowCommit.shouldCommit(BOUNDARY, info("stop", -1), 16), "an unknown stop token (-1) is in no boundary set");
        assertFalse(WindowCommit.shouldCommit(BOUNDARY, null, 16), "an older client sends no end info: the empty report");
        assertFalse(WindowCommit.shouldCommit(BOUNDARY, info("stop", IM_END + (1L << 32)), 16), "a token id past int is none of ours");
        assertFalse(WindowCommit.shouldCommit(CommitSettings.NEVER, info("stop", IM_END), 16));
    }

    @Test
    void atPromptEndEveryEndingButAbortErrorAndNoReportCommits() {
        assertTrue(WindowCommit.shouldCommit(PROMPT, info("length", 5), 16), "the prompt is re-sent however the answer ended");
        assertTrue(WindowCommit.shouldCommit(PROMPT, info("stop", 5), 16), "boundary tokens are ignored at prompt_end");
        for (String reason : List.of("abort", "error", "")) {
            assertFalse(WindowCommit.shouldCommit(PROMPT, info(reason, IM_END), 16), reason);
        }
    }

    @Test
    void theAnchorIsClippedToWhatWasStoredAndFlooredToChunks() {
        assertEquals(4, WindowCommit.anchorChunks(Anchor.GENERATION_END, 8, 16, 4));
        assertEquals(2, WindowCommit.anchorChunks(Anchor.PROMPT_END, 8, 16, 4));
        assertEquals(4, WindowCommit.anchorChunks(Anchor.GENERATION_END, 7, 17, 4), "a partial trailing chunk was never stored");
        assertEquals(1, WindowCommit.anchorChunks(Anchor.PROMPT_END, 7, 17, 4));
        assertEquals(2, WindowCommit.anchorChunks(Anchor.PROMPT_END, 64, 8, 4), "nothing past what reached L1");
        assertEquals(0, WindowCommit.anchorChunks(Anchor.GENERATION_END, 0, 0, 4));
    }
}
