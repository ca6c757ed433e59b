import io.lmcache.bench.events.ChildSubscribers;
import io.lmcache.bench.events.StoreFeeder;
import io.lmcache.server.testing.ServerProcess;
import java.util.Map;

public class KvProf {
    public static void main(String[] a) throws Exception {
        int seconds = Integer.parseInt(a[0]);
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--worker-reap-timeout-seconds", "0");
             StoreFeeder feeder = new StoreFeeder(server.endpoint(), "prof/feed", 77, 500)) {
            ChildSubscribers subs = new ChildSubscribers(ChildSubscribers.defaultPython(), server.port(), 8, 5);
            feeder.resume();
            Thread.sleep(5000);
            System.out.println("A " + System.currentTimeMillis() + " stores " + feeder.stores());
            Thread.sleep(seconds * 1000L);
            System.out.println("B " + System.currentTimeMillis() + " stores " + feeder.stores());
            subs.attach("prof/feed");
            Thread.sleep(3000);
            String s0 = io.lmcache.server.testing.Http.get(server.httpBase() + "/status").body();
            int k0 = s0.indexOf("\"kv_events\"");
            System.out.println("after catch-up " + s0.substring(k0, s0.indexOf('}', k0) + 1) + " " + subs.stats());
            Thread.sleep(seconds * 1000L);
            System.out.println("C " + System.currentTimeMillis() + " stores " + feeder.stores() + " " + subs.stats());
            String st = io.lmcache.server.testing.Http.get(server.httpBase() + "/status").body();
            int k = st.indexOf("\"kv_events\"");
            System.out.println(st.substring(k, st.indexOf('}', k) + 1));
            subs.detach();
            feeder.pause();
            subs.close();
        }
    }
}
