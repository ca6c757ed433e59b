package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import picocli.CommandLine.Model.OptionSpec;

/** {@code --help}: every flag once, under its topic, with a lower-case placeholder; the environment and examples after them. */
class ServerOptionsHelpTest {

    private static String help() {
        ConfigLoader.Outcome outcome = ConfigLoader.load(new String[] {"--help"}, Map.of(), MemoryLimits.unlimited());
        return assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, outcome::toString).text();
    }

    @Test
    void everyVisibleFlagHasATopicAndIsListedOnceUnderIt() {
        List<String> topical = ServerOptions.TOPICS.values().stream().flatMap(List::stream).toList();
        for (OptionSpec option : ConfigLoader.commandLine().getCommandSpec().options()) {
            if (!option.hidden()) {
                assertTrue(topical.contains(option.longestName()), option.longestName() + " has a topic in ServerOptions.TOPICS");
            }
        }
        String help = help();
        assertFalse(help.contains("\nOther:"), "no flag falls outside the topics:\n" + help);
        List<Integer> headings = new ArrayList<>();
        for (String topic : ServerOptions.TOPICS.keySet()) {
            headings.add(help.indexOf("\n" + topic + ":\n"));
        }
        assertFalse(headings.contains(-1), "every topic is a heading: " + headings + "\n" + help);
        assertEquals(headings.stream().sorted().toList(), headings, "the topics in order");
        for (String flag : topical) {
            Matcher listed = Pattern.compile("(?m)^ +(-\\w, )?" + Pattern.quote(flag) + "\\b").matcher(help);
            assertTrue(listed.find(), flag + " is listed");
            assertFalse(listed.find(), flag + " is listed once");
        }
        assertTrue(help.indexOf("--l1-size-gb") > help.indexOf("\nL1 pool (host memory):\n"), "a flag under its own topic");
        assertTrue(help.indexOf("--l1-size-gb") < help.indexOf("\nChunks and keys:\n"), "a flag under its own topic");
    }

    @Test
    void placeholdersAreLowerCaseWordsNotFieldNames() {
        String help = help();
        Matcher label = Pattern.compile("<([^>]+)>").matcher(help);
        int labels = 0;
        while (label.find()) {
            labels++;
            assertFalse(label.group(1).chars().anyMatch(Character::isUpperCase), "a camelCase placeholder: " + label.group());
        }
        assertTrue(labels >= 40, "placeholders: " + labels);
        assertTrue(help.contains("--l1-size-gb=<gb>"), help);
        assertTrue(help.contains("--port=<port>"), help);
    }

    @Test
    void theEnvironmentAndExamplesFollowTheFlags() {
        String help = help();
        int environment = help.indexOf("Environment:");
        assertTrue(environment > help.indexOf("--gpu-warmup-budget-ms"), "after the flags");
        for (String variable : List.of("LMCACHE_LOG_LEVEL", "LMCACHE_LOG_FORMAT", "LMCACHE_HTTP_ADMIN_TOKEN", "LMCACHE_MP_CONFIG",
                "PYTHONHASHSEED", "LMCACHE_RESP_HOST", "JAVA_HOME", "LMCACHE_JAVA_OPTS", "LMCACHE_AOT_CACHE", "LMCACHE_AOT_TRAIN")) {
            assertTrue(help.indexOf(variable, environment) > 0, variable + " in the environment section");
        }
        int examples = help.indexOf("Examples:");
        assertTrue(examples > environment, help);
        // the examples without a file to read or a directory to make are command lines the server accepts
        List<String> commands = help.substring(examples).lines().map(String::strip).filter(l -> l.contains("lmcache-server --"))
                .filter(l -> !l.contains("--config-file") && !l.contains("--l2-adapter")).toList();
        assertEquals(3, commands.size(), commands.toString());
        for (String line : commands) {
            assertTrue(runs(line) != null, line);
        }
    }

    /** The parsed outcome of an example's flags, or null when it is refused. */
    private static ConfigLoader.Outcome runs(String line) {
        String flags = line.substring(line.indexOf("lmcache-server ") + "lmcache-server ".length());
        ConfigLoader.Outcome outcome = ConfigLoader.load(flags.split(" +"), Map.of("PYTHONHASHSEED", "0"), MemoryLimits.unlimited());
        return outcome instanceof ConfigLoader.Outcome.Run ? outcome : null;
    }
}
