package io.lmcache.bench.copy;

import io.lmcache.bench.Machine;
import io.lmcache.bench.Medians;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;

/** CpuCopyBench's report: per pattern, the median GB/s of each transfer and its ratio to the plain copy of the same run. */
final class Report {
    private Report() {}

    static String markdown(CpuCopyBench.Settings s, List<CpuCopyBench.Round> rounds, String machine, String load, String verified,
            String args) {
        StringBuilder md = new StringBuilder();
        md.append("### CPU path against plain copies (issue 52)\n\nCommand: `CpuCopyBench ").append(args).append("`  \nSources: commit ")
                .append(Machine.source()).append("  \nMachine: ").append(machine).append("  \nLoad averages before: ").append(load)
                .append(".\n\n");
        md.append(String.format(Locale.ROOT, "Request: %d chunks of 256 tokens, 32 layers NHD [2, nb, 16, 8, 128] bf16 = %.0f MiB;"
                + " %d workers at once, %d request(s) each back to back, against %d threads' plain copy of their %.0f MiB;"
                + " servers with --cpu-copy-threads %s, one after another;"
                + " %d rounds after %d"
                + " untimed. GB/s = 10^9 B/s, medians of the rounds; ratio = median of the rounds' server ÷ plain (same round).%n%n",
                s.chunks(), s.requestBytes() / 1048576.0, s.workers(), s.requests(), s.baselineThreads(),
                s.workers() * s.requests() * s.requestBytes() / 1048576.0,
                s.copyThreads(), s.rounds(), s.warmup()));
        md.append("| server | pattern | transfer | median GB/s | baseline median GB/s | ratio (median of rounds) | goal |\n|---|---|---|---|---|---|---|\n");
        for (String threads : s.copyThreads().split(",")) {
            for (String pattern : s.patterns()) {
                List<CpuCopyBench.Round> mine = rounds.stream().filter(r -> r.pattern().equals(pattern) && r.copyThreads().equals(threads.strip()))
                        .toList();
                rows(md, "--cpu-copy-threads " + threads.strip() + " | " + pattern, s.workers(), mine);
            }
        }
        md.append("\nBaselines: 1 worker against one thread's `MemorySegment.copy` of one contiguous shm buffer into another of the same"
                + " size; several workers against ").append(s.baselineThreads()).append(" threads each copying a contiguous share of the"
                + " workers' bytes in one call each, timed from one start to the last thread's end; \"plain in the request's piece size\":"
                + " the same threads and shares, copied in calls of the longest piece the server copies for the pattern ("
                + (CpuCopyBench.Settings.pieceBytes("consecutive") >> 10) + " KiB consecutive, " + (CpuCopyBench.Settings.pieceBytes("scattered") >> 10)
                + " KiB scattered), which the JVM copies without the non-temporal stores it uses from 2.5 MB a call."
                + " Server figures are end to end (request sent to reply"
                + " received), so they hold the encoding, the ZeroMQ round trip and the planning too.\n\n");
        md.append("Checked: ").append(verified.strip()).append('\n');
        return md.toString();
    }

    private static void rows(StringBuilder md, String pattern, int workers, List<CpuCopyBench.Round> mine) {
        if (mine.isEmpty()) {
            return;
        }
        row(md, pattern, "STORE, 1 worker", mine, CpuCopyBench.Round::storeOne, CpuCopyBench.Round::plainOne, "≥ 0.9");
        row(md, pattern, "RETRIEVE, 1 worker", mine, CpuCopyBench.Round::retrieveOne, CpuCopyBench.Round::plainOne, "≥ 0.9");
        row(md, pattern, "STORE, " + workers + " workers", mine, CpuCopyBench.Round::storeMany, CpuCopyBench.Round::plainMany, "≥ 0.8");
        row(md, pattern, "RETRIEVE, " + workers + " workers", mine, CpuCopyBench.Round::retrieveMany, CpuCopyBench.Round::plainMany, "≥ 0.8");
        row(md, pattern, "STORE, " + workers + " workers ÷ plain in the request's piece size", mine, CpuCopyBench.Round::storeMany,
                CpuCopyBench.Round::plainPieces, "(what the server adds)");
        row(md, pattern, "RETRIEVE, " + workers + " workers ÷ plain in the request's piece size", mine, CpuCopyBench.Round::retrieveMany,
                CpuCopyBench.Round::plainPieces, "(what the server adds)");
    }

    private static void row(StringBuilder md, String pattern, String what, List<CpuCopyBench.Round> rounds,
            ToDoubleFunction<CpuCopyBench.Round> server, ToDoubleFunction<CpuCopyBench.Round> plain, String goal) {
        double ratio = Medians.of(rounds, r -> server.applyAsDouble(r) / plain.applyAsDouble(r));
        md.append(String.format(Locale.ROOT, "| %s | %s | %.2f | %.2f | %.3f | %s |%n", pattern, what, Medians.of(rounds, server),
                Medians.of(rounds, plain), ratio, goal));
    }

    static String csv(List<CpuCopyBench.Round> rounds) {
        StringBuilder out = new StringBuilder("copy_threads,pattern,round,plain_one_gbps,store_one_gbps,retrieve_one_gbps,plain_many_gbps,"
                + "store_many_gbps,retrieve_many_gbps,plain_pieces_gbps\n");
        for (CpuCopyBench.Round r : rounds) {
            out.append(String.format(Locale.ROOT, "%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f%n", r.copyThreads(), r.pattern(), r.round(),
                    r.plainOne(), r.storeOne(), r.retrieveOne(), r.plainMany(), r.storeMany(), r.retrieveMany(), r.plainPieces()));
        }
        return out.toString();
    }
}
