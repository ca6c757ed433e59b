package io.lmcache.server.testing;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.DoubleUnaryOperator;
import java.util.regex.Pattern;

/**
 * The part of PromQL the dashboards and alert rules use, evaluated over two scrapes of one server
 * taken {@code seconds} apart, as Prometheus would evaluate it at the second one: selectors with
 * label matchers, {@code rate}/{@code irate}/{@code increase} over the two samples, arithmetic and
 * comparisons (vector-vector one-to-one on equal label sets, vector-scalar), {@code or},
 * {@code sum}/{@code max}/{@code min}/{@code avg}/{@code count} with {@code by}/{@code without},
 * {@code histogram_quantile}, {@code clamp_min}, {@code clamp_max}, {@code abs}, {@code absent} and {@code vector}.
 * Grafana's variables are substituted first ({@code $__rate_interval} by a window, any other
 * {@code $var} by {@code .*}, as an "All" selection). Anything else is a parse error, so a query
 * outside the subset fails the test instead of passing unevaluated.
 */
public final class PromQl {
    /** An instant vector: label set (without {@code __name__}) to value; a scalar is one entry under {@link #SCALAR}. */
    public record Value(Map<Map<String, String>, Double> series, boolean scalar) {
        static final Map<String, String> SCALAR = Map.of();

        /** True when the result has a series with a value that is a number (what Grafana plots). */
        public boolean hasData() {
            return series.values().stream().anyMatch(v -> !v.isNaN() && !v.isInfinite());
        }
    }

    private static final Pattern TOKEN = Pattern.compile(
            "\\s*(?:(?<num>[0-9]+(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)|(?<str>\"(?:[^\"\\\\]|\\\\.)*\")|(?<id>[a-zA-Z_:][a-zA-Z0-9_:]*)"
                    + "|(?<op>=~|!~|==|!=|>=|<=|[-+*/(){}\\[\\],=<>]))");

    private final Scrape before;
    private final Scrape after;
    private final double seconds;
    private List<String> tokens;
    private int pos;

    public PromQl(Scrape before, Scrape after, double seconds) {
        this.before = before;
        this.after = after;
        this.seconds = seconds;
    }

    public Value eval(String query) {
        String text = query.replace("$__rate_interval", "1m").replace("$__interval", "1m").replaceAll("\\$\\{?[a-zA-Z_]+}?", ".*");
        tokens = tokenize(text);
        pos = 0;
        Value value = orExpr();
        if (pos != tokens.size()) {
            throw new IllegalArgumentException("unparsed from '" + tokens.get(pos) + "' in: " + query);
        }
        return value;
    }

    private static List<String> tokenize(String text) {
        List<String> out = new ArrayList<>();
        var matcher = TOKEN.matcher(text);
        int at = 0;
        while (at < text.length()) {
            if (text.substring(at).isBlank()) {
                break;
            }
            if (!matcher.find(at) || matcher.start() != at) {
                throw new IllegalArgumentException("cannot read '" + text.substring(at) + "'");
            }
            out.add(matcher.group().strip());
            at = matcher.end();
        }
        return out;
    }

    private String peek() {
        return pos < tokens.size() ? tokens.get(pos) : "";
    }

    private String next() {
        return tokens.get(pos++);
    }

    private void expect(String token) {
        if (!next().equals(token)) {
            throw new IllegalArgumentException("expected '" + token + "' before '" + (pos - 1 < tokens.size() ? tokens.get(pos - 1) : "") + "'");
        }
    }

    private Value orExpr() {
        Value left = comparison();
        while (peek().equals("or")) {
            next();
            Value right = comparison();
            Map<Map<String, String>, Double> union = new LinkedHashMap<>(left.series());
            right.series().forEach(union::putIfAbsent);
            left = new Value(union, false);
        }
        return left;
    }

    private Value comparison() {
        Value left = additive();
        while (Set.of(">", "<", ">=", "<=", "==", "!=").contains(peek())) {
            String op = next();
            left = binary(left, additive(), op);
        }
        return left;
    }

    private Value additive() {
        Value left = multiplicative();
        while (peek().equals("+") || peek().equals("-")) {
            String op = next();
            left = binary(left, multiplicative(), op);
        }
        return left;
    }

    private Value multiplicative() {
        Value left = unary();
        while (peek().equals("*") || peek().equals("/")) {
            String op = next();
            left = binary(left, unary(), op);
        }
        return left;
    }

    private Value unary() {
        if (peek().equals("-")) {
            next();
            return binary(scalar(0), unary(), "-");
        }
        return primary();
    }

    private Value primary() {
        String token = next();
        if (token.equals("(")) {
            Value inner = orExpr();
            expect(")");
            return inner;
        }
        if (Character.isDigit(token.charAt(0))) {
            return scalar(Double.parseDouble(token));
        }
        switch (token) {
            case "sum", "max", "min", "avg", "count" -> {
                return aggregate(token);
            }
            case "rate", "irate", "increase" -> {
                expect("(");
                Value value = range(token);
                expect(")");
                return value;
            }
            case "histogram_quantile" -> {
                expect("(");
                double q = single(orExpr());
                expect(",");
                Value buckets = orExpr();
                expect(")");
                return quantile(q, buckets);
            }
            case "clamp_min", "clamp_max" -> {
                expect("(");
                Value vector = orExpr();
                expect(",");
                double bound = single(orExpr());
                expect(")");
                return map(vector, v -> token.equals("clamp_min") ? Math.max(v, bound) : Math.min(v, bound));
            }
            case "abs" -> {
                expect("(");
                Value vector = orExpr();
                expect(")");
                return map(vector, Math::abs);
            }
            case "absent" -> {
                // Prometheus: one series of value 1 when the vector is empty, else nothing
                expect("(");
                Value vector = orExpr();
                expect(")");
                return new Value(vector.series().isEmpty() ? Map.of(Map.of(), 1.0) : Map.of(), false);
            }
            case "vector" -> {
                expect("(");
                double v = single(orExpr());
                expect(")");
                return new Value(Map.of(Map.of(), v), false);
            }
            default -> {
                pos--;
                return new Value(select(after, selector()), false);
            }
        }
    }

    private record Selector(String name, List<String[]> matchers) {}

    private Selector selector() {
        String name = next();
        List<String[]> matchers = new ArrayList<>();
        if (peek().equals("{")) {
            next();
            while (!peek().equals("}")) {
                String label = next();
                String op = next();
                String value = unquote(next());
                matchers.add(new String[] {label, op, value});
                if (peek().equals(",")) {
                    next();
                }
            }
            next();
        }
        return new Selector(name, matchers);
    }

    private static String unquote(String token) {
        return token.substring(1, token.length() - 1).replace("\\\"", "\"").replace("\\\\", "\\");
    }

    private static Map<Map<String, String>, Double> select(Scrape scrape, Selector selector) {
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        for (Scrape.Sample sample : scrape.samples()) {
            if (!sample.name().equals(selector.name())) {
                continue;
            }
            boolean all = true;
            for (String[] m : selector.matchers()) {
                String actual = sample.labels().getOrDefault(m[0], "");
                all &= switch (m[1]) {
                    case "=" -> actual.equals(m[2]);
                    case "!=" -> !actual.equals(m[2]);
                    case "=~" -> actual.matches(m[2]);
                    case "!~" -> !actual.matches(m[2]);
                    default -> throw new IllegalArgumentException("matcher " + m[1]);
                };
            }
            if (all) {
                out.put(sample.labels(), sample.value());
            }
        }
        return out;
    }

    /** {@code rate(x[d])}: the change between the two scrapes over the time between them (a counter reset counts from 0). */
    private Value range(String function) {
        Selector selector = selector();
        expect("[");
        while (!next().equals("]")) {
            // the window: the two scrapes are the samples it holds, whatever its length
            continue;
        }
        Map<Map<String, String>, Double> earlier = select(before, selector);
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        select(after, selector).forEach((labels, now) -> {
            Double then = earlier.get(labels);
            if (then != null) {
                double delta = now >= then ? now - then : now;
                out.put(labels, function.equals("increase") ? delta : delta / seconds);
            }
        });
        return new Value(out, false);
    }

    private Value aggregate(String op) {
        List<String> by = null;
        boolean without = false;
        if (peek().equals("by") || peek().equals("without")) {
            without = next().equals("without");
            by = labelList();
        }
        expect("(");
        Value inner = orExpr();
        expect(")");
        if (peek().equals("by") || peek().equals("without")) {
            without = next().equals("without");
            by = labelList();
        }
        Map<Map<String, String>, List<Double>> groups = new LinkedHashMap<>();
        for (Map.Entry<Map<String, String>, Double> entry : inner.series().entrySet()) {
            Map<String, String> key = new TreeMap<>();
            for (Map.Entry<String, String> label : entry.getKey().entrySet()) {
                boolean listed = by != null && by.contains(label.getKey());
                if (by != null && listed != without) {
                    key.put(label.getKey(), label.getValue());
                }
            }
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(entry.getValue());
        }
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        groups.forEach((key, values) -> out.put(key, switch (op) {
            case "sum" -> values.stream().mapToDouble(Double::doubleValue).sum();
            case "max" -> values.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
            case "min" -> values.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
            case "avg" -> values.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN);
            default -> (double) values.size();
        }));
        return new Value(out, false);
    }

    private List<String> labelList() {
        expect("(");
        List<String> labels = new ArrayList<>();
        while (!peek().equals(")")) {
            labels.add(next());
            if (peek().equals(",")) {
                next();
            }
        }
        next();
        return labels;
    }

    private static Value quantile(double q, Value buckets) {
        Map<Map<String, String>, TreeMap<Double, Double>> groups = new LinkedHashMap<>();
        buckets.series().forEach((labels, count) -> {
            Map<String, String> key = new TreeMap<>(labels);
            String le = key.remove("le");
            if (le != null) {
                groups.computeIfAbsent(key, k -> new TreeMap<>()).put(le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le), count);
            }
        });
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        groups.forEach((key, cumulative) -> {
            double total = cumulative.lastEntry().getValue();
            if (!(total > 0)) {
                out.put(key, Double.NaN);
                return;
            }
            double rank = q * total;
            double lowerBound = 0;
            double lowerCount = 0;
            for (Map.Entry<Double, Double> bucket : cumulative.entrySet()) {
                if (bucket.getValue() >= rank) {
                    double upper = bucket.getKey().isInfinite() ? lowerBound : bucket.getKey();
                    double inBucket = bucket.getValue() - lowerCount;
                    out.put(key, inBucket == 0 ? upper : lowerBound + (upper - lowerBound) * (rank - lowerCount) / inBucket);
                    return;
                }
                lowerBound = bucket.getKey();
                lowerCount = bucket.getValue();
            }
        });
        return new Value(out, false);
    }

    private static Value binary(Value left, Value right, String op) {
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        boolean comparison = Set.of(">", "<", ">=", "<=", "==", "!=").contains(op);
        if (left.scalar() && right.scalar()) {
            return scalar(apply(single(left), single(right), op));
        }
        if (right.scalar() || left.scalar()) {
            Value vector = right.scalar() ? left : right;
            double s = single(right.scalar() ? right : left);
            vector.series().forEach((labels, v) -> {
                double result = right.scalar() ? apply(v, s, op) : apply(s, v, op);
                if (!comparison || result == 1) {
                    out.put(labels, comparison ? v : result);
                }
            });
            return new Value(out, false);
        }
        Set<Map<String, String>> matched = new HashSet<>(right.series().keySet());
        left.series().forEach((labels, v) -> {
            if (matched.contains(labels)) {
                double result = apply(v, right.series().get(labels), op);
                if (!comparison || result == 1) {
                    out.put(labels, comparison ? v : result);
                }
            }
        });
        return new Value(out, false);
    }

    private static double apply(double a, double b, String op) {
        return switch (op) {
            case "+" -> a + b;
            case "-" -> a - b;
            case "*" -> a * b;
            case "/" -> a / b;
            case ">" -> a > b ? 1 : 0;
            case "<" -> a < b ? 1 : 0;
            case ">=" -> a >= b ? 1 : 0;
            case "<=" -> a <= b ? 1 : 0;
            case "==" -> a == b ? 1 : 0;
            case "!=" -> a != b ? 1 : 0;
            default -> throw new IllegalArgumentException("operator " + op);
        };
    }

    private static Value map(Value value, DoubleUnaryOperator f) {
        Map<Map<String, String>, Double> out = new LinkedHashMap<>();
        value.series().forEach((labels, v) -> out.put(labels, f.applyAsDouble(v)));
        return new Value(out, value.scalar());
    }

    private static Value scalar(double v) {
        return new Value(Map.of(Value.SCALAR, v), true);
    }

    private static double single(Value value) {
        if (!value.scalar()) {
            throw new IllegalArgumentException("a scalar is needed here, got a vector of " + value.series().size());
        }
        return value.series().get(Value.SCALAR);
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "PromQl[%d -> %d samples over %.1f s]", before.samples().size(), after.samples().size(), seconds);
    }
}
