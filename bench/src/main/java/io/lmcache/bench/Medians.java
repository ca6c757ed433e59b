package io.lmcache.bench;

import java.util.List;
import java.util.function.ToDoubleFunction;

/** The median over a benchmark's rounds of one figure (the mean of the middle two for an even count). */
public final class Medians {
    private Medians() {}

    public static <T> double of(List<T> rounds, ToDoubleFunction<? super T> figure) {
        double[] values = rounds.stream().mapToDouble(figure).sorted().toArray();
        int n = values.length;
        return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    }
}
