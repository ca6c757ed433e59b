package io.lmcache.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * bench/RESULTS.md holds one section per benchmark between {@code <!-- bench:NAME begin -->} and
 * {@code <!-- bench:NAME end -->}; a run replaces its own section and leaves the others alone, so
 * each benchmark can be re-run by itself (bench_copy.py in the test client does the same).
 */
public final class ResultsFile {
    private static final String HEADER = "# Benchmark results\n\n"
            + "Written by the benchmarks themselves (see README.md in this folder): a run replaces its own section, between its"
            + " `bench:` markers, and keeps everything outside them.\n";

    private ResultsFile() {}

    public static void writeSection(Path file, String name, String markdown) {
        String begin = "<!-- bench:" + name + " begin -->";
        String end = "<!-- bench:" + name + " end -->";
        String block = begin + "\n" + markdown.strip() + "\n" + end;
        try {
            String text = Files.exists(file) ? Files.readString(file) : HEADER;
            int from = text.indexOf(begin);
            int to = text.indexOf(end);
            if (from >= 0 && to > from) {
                text = text.substring(0, from) + block + text.substring(to + end.length());
            } else {
                text = text.stripTrailing() + "\n\n" + block + "\n";
            }
            Files.writeString(file, text);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
