import java.nio.file.Path;
import java.util.*;
import jdk.jfr.consumer.*;

/** Per thread group: samples, top self frames and top inclusive methods (Java and native samples). */
public class JfrAgg {
    public static void main(String[] args) throws Exception {
        String filter = args.length > 1 ? args[1] : "";
        long fromMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
        long toMs = args.length > 3 ? Long.parseLong(args[3]) : Long.MAX_VALUE;
        Map<String, Integer> total = new TreeMap<>();
        Map<String, Map<String, Integer>> self = new TreeMap<>();
        Map<String, Map<String, Integer>> incl = new TreeMap<>();
        Map<String, Map<String, Integer>> stacks = new TreeMap<>();
        for (RecordedEvent e : RecordingFile.readAllEvents(Path.of(args[0]))) {
            String type = e.getEventType().getName();
            if (!type.equals("jdk.ExecutionSample") && !type.equals("jdk.NativeMethodSample")) continue;
            long at = e.getStartTime().toEpochMilli();
            if (at < fromMs || at >= toMs) continue;
            RecordedThread t = e.getThread(type.equals("jdk.ExecutionSample") ? "sampledThread" : "sampledThread");
            String name = t == null ? "?" : t.getJavaName();
            if (name == null) name = "?";
            String group = name.replaceAll("[-_]?\\d+$", "") + (type.equals("jdk.NativeMethodSample") ? " [native]" : "");
            if (!filter.isEmpty() && !group.matches(filter)) continue;
            RecordedStackTrace st = e.getStackTrace();
            if (st == null) continue;
            total.merge(group, 1, Integer::sum);
            List<RecordedFrame> frames = st.getFrames();
            Set<String> seen = new HashSet<>();
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < frames.size(); i++) {
                RecordedFrame f = frames.get(i);
                String m = f.getMethod().getType().getName().replaceAll("^.*\\.", "") + "." + f.getMethod().getName();
                if (i == 0) self.computeIfAbsent(group, k -> new HashMap<>()).merge(m, 1, Integer::sum);
                if (seen.add(m)) incl.computeIfAbsent(group, k -> new HashMap<>()).merge(m, 1, Integer::sum);
                if (i < 8) sb.append(i == 0 ? "" : " < ").append(m);
            }
            stacks.computeIfAbsent(group, k -> new HashMap<>()).merge(sb.toString(), 1, Integer::sum);
        }
        for (var g : total.entrySet()) {
            if (g.getValue() < 50) continue;
            System.out.println("=== " + g.getKey() + ": " + g.getValue() + " samples");
            print("self", self.get(g.getKey()), g.getValue(), 25);
            print("inclusive", incl.get(g.getKey()), g.getValue(), 45);
            print("stacks", stacks.get(g.getKey()), g.getValue(), 15);
        }
    }

    static void print(String what, Map<String, Integer> m, int total, int n) {
        System.out.println("  -- " + what);
        m.entrySet().stream().sorted((a, b) -> b.getValue() - a.getValue()).limit(n)
                .forEach(en -> System.out.printf("  %6d %5.1f%%  %s%n", en.getValue(), 100.0 * en.getValue() / total, en.getKey()));
    }
}
