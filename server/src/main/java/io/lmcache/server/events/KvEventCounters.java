package io.lmcache.server.events;

import io.lmcache.server.metrics.KvEventMetrics;
import io.lmcache.server.protocol.KvEventKind;
import java.util.Arrays;
import java.util.List;

/** The channel's counts as the metrics read them. */
public record KvEventCounters(KvEventRecorder recorder, KvEventStreams streams) implements KvEventMetrics.Source {
    @Override
    public List<String> recordKinds() {
        return Arrays.stream(KvEventKind.values()).map(KvEventKind::wireName).toList();
    }

    @Override
    public double records(String kind) {
        for (KvEventKind known : KvEventKind.values()) {
            if (known.wireName().equals(kind)) {
                return recorder.log().appendedCounter(known).sum();
            }
        }
        return 0;
    }

    @Override
    public double lostMarkers() {
        return recorder.log().lostMarkers();
    }

    @Override
    public double unboundStores() {
        return recorder.unboundStores();
    }

    @Override
    public double logDepth() {
        return recorder.log().depth();
    }

    @Override
    public double subscribers() {
        return streams.subscribers();
    }

    @Override
    public double subscriptionsOpened() {
        return streams.opened();
    }

    @Override
    public double batchesSent() {
        return streams.batches();
    }

    @Override
    public double batchesDropped() {
        return streams.batchesDropped();
    }

    @Override
    public List<String> endReasons() {
        return Arrays.stream(KvEventStreams.Ended.values()).map(KvEventStreams.Ended::label).toList();
    }

    @Override
    public double subscriptionsEnded(String reason) {
        for (KvEventStreams.Ended ended : KvEventStreams.Ended.values()) {
            if (ended.label().equals(reason)) {
                return streams.endedCounter(ended).sum();
            }
        }
        return 0;
    }
}
