package io.lmcache.server.storage;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The host's NUMA nodes and the node of each GPU, as sysfs says: {@code devices/system/node/node<N>/cpulist} and
 * {@code bus/pci/devices/<pci bus id>/numa_node}. Read from a root directory ({@code /sys}; tests give a fake tree).
 * Anything missing or malformed reads as "no node" (-1), never as an error: placement is an optimisation.
 */
public record NumaTopology(Path sysfs, Map<Integer, BitSet> nodeCpus) {
    /** Bounds what a malformed file can make us allocate: far above any host's CPU or node count. */
    static final int MAX_CPUS = 1 << 14;
    static final int MAX_NODES = 1 << 10;
    private static final Pattern NODE_DIR = Pattern.compile("node(\\d{1,4})");
    private static final Pattern BUS_ID = Pattern.compile("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");

    /** The nodes under {@code sysfs}; none when it has no node directory (a kernel without NUMA, or not Linux). */
    public static NumaTopology read(Path sysfs) {
        Map<Integer, BitSet> nodes = new TreeMap<>();
        Path dir = sysfs.resolve("devices/system/node");
        if (Files.isDirectory(dir)) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir, "node*")) {
                for (Path entry : entries) {
                    var match = NODE_DIR.matcher(entry.getFileName().toString());
                    if (match.matches() && nodes.size() < MAX_NODES) {
                        nodes.put(Integer.parseInt(match.group(1)), parseCpuList(firstLine(entry.resolve("cpulist"))));
                    }
                }
            } catch (IOException e) {
                nodes.clear();
            }
        }
        return new NumaTopology(sysfs, Map.copyOf(nodes));
    }

    public int nodeCount() {
        return nodeCpus.size();
    }

    /**
     * The node of the PCI device with this bus id, or -1 when sysfs does not say (a one-node host writes -1 there too).
     * The id as CUDA gives it ({@code 0000:18:00.0}) or as nvidia-smi does ({@code 00000000:18:00.0}), any case.
     */
    public int gpuNode(String pciBusId) {
        String id = sysfsBusId(pciBusId);
        if (id.isEmpty()) {
            return -1;
        }
        String text = firstLine(sysfs.resolve("bus/pci/devices").resolve(id).resolve("numa_node"));
        try {
            int node = Integer.parseInt(text);
            return nodeCpus.containsKey(node) ? node : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** sysfs's form: a 4-digit domain, lowercase; "" for anything that is not a bus id (no path is built from it then). */
    static String sysfsBusId(String pciBusId) {
        String id = pciBusId == null ? "" : pciBusId.strip().toLowerCase(Locale.ROOT);
        if (!BUS_ID.matcher(id).matches()) {
            return "";
        }
        int colon = id.indexOf(':');
        return colon > 4 ? id.substring(colon - 4) : id;
    }

    /** {@code 0-15,32-47}: the CPUs listed; bad parts are skipped, ids bounded by {@link #MAX_CPUS}. */
    static BitSet parseCpuList(String text) {
        BitSet cpus = new BitSet();
        for (String part : text.split(",")) {
            String range = part.strip();
            if (range.isEmpty()) {
                continue;
            }
            try {
                int dash = range.indexOf('-');
                int from = Integer.parseInt(dash < 0 ? range : range.substring(0, dash));
                int to = dash < 0 ? from : Integer.parseInt(range.substring(dash + 1));
                if (from >= 0 && from <= to && to < MAX_CPUS) {
                    cpus.set(from, to + 1);
                }
            } catch (NumberFormatException e) {
                // skipped: a cpulist is kernel-written; a garbled part just loses its CPUs
            }
        }
        return cpus;
    }

    private static String firstLine(Path file) {
        try (var reader = Files.newBufferedReader(file)) {
            String line = reader.readLine();
            return line == null ? "" : line.strip();
        } catch (IOException e) {
            return "";
        }
    }
}
