package io.lmcache.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * bench/RESULTS.md holds one section per benchmark between {@code <!-- bench:NAME begin -->} and
 * {@code <!-- bench:NAME end -->}; a run replaces its own section and leaves the others alone, so
 * each benchmark can be re-run by itself (bench_copy.py in the test client does the same). The
 * hand-written text around a section (its goal, the journal links) is outside the markers.
 *
 * <p>RESULTS.md is a page of current figures, so a report may hold a {@link #DETAILS} line: what
 * follows it (every measurement, per-launch records) goes only to {@code results/current/NAME.md}
 * next to the results file, which keeps the whole report, and the section links there.
 */
public final class ResultsFile {
    /** The line in a report after which it is details: kept in the details file, left out of RESULTS.md. */
    public static final String DETAILS = "<!-- bench:details -->";

    private static final String HEADER = "# Benchmark results\n\n"
            + "Written by the benchmarks themselves (see README.md in this folder): a run replaces its own section, between its"
            + " `bench:` markers, and keeps everything outside them.\n";

    private ResultsFile() {}

    public static void writeSection(Path file, String name, String markdown) {
        String begin = "<!-- bench:" + name + " begin -->";
        String end = "<!-- bench:" + name + " end -->";
        String summary = markdown.strip();
        int cut = markdown.indexOf(DETAILS);
        if (cut >= 0) {
            String details = "results/current/" + name + ".md";
            summary = markdown.substring(0, cut).strip() + "\n\nThe whole report of this run, every measurement included: [" + details
                    + "](" + details + ").";
            write(file.toAbsolutePath().getParent().resolve(details), "<!-- The whole report of the run that wrote section `" + name
                    + "` of RESULTS.md; replaced by its next run. -->\n\n" + markdown.replace(DETAILS, "").replaceAll("\n{3,}", "\n\n").strip()
                    + "\n");
        }
        String block = begin + "\n" + summary + "\n" + end;
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

    private static void write(Path path, String text) {
        try {
            Files.createDirectories(path.getParent());
            Files.writeString(path, text);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
