// Evaluates a corpus of SQL92 selectors with RocketMQ's own filter classes (built from its
// sources by build_selectors.sh, never committed) and writes what RocketMQ makes of each:
// refused, or TRUE / FALSE / NULL / threw for every property set. rocketstore's selectors
// are checked against this output (tests/golden/test_rocketmq_selectors.py).
//
// Corpus lines (tab-separated, each field escaped: \\ \t \n \r):
//   P <key> <value> <key> <value> ...   a message's properties (all strings, as a broker
//                                       hands them to the filter)
//   E <expression>                      a selector
// Output: one line per E line, in order: "ERR" or "OK<tab>" and one letter per P line
// (T, F, N for null, X when evaluating threw, ? for a non-boolean result).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.filter.expression.BooleanExpression;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class SelectorHarness {
    static String unescape(String text) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c != '\\' || i + 1 == text.length()) {
                out.append(c);
                continue;
            }
            char next = text.charAt(++i);
            out.append(next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : next);
        }
        return out.toString();
    }

    static final class Properties implements EvaluationContext {
        private final Map<String, Object> values;

        Properties(Map<String, Object> values) {
            this.values = values;
        }

        public Object get(String name) {
            return values.get(name);
        }

        public Map<String, Object> keyValues() {
            return values;
        }
    }

    static char outcome(BooleanExpression expression, Map<String, Object> properties) {
        Object value;
        try {
            value = expression.evaluate(new Properties(properties));
        } catch (Throwable t) {
            return 'X';
        }
        if (value == null) {
            return 'N';
        }
        if (value instanceof Boolean) {
            return ((Boolean) value) ? 'T' : 'F';
        }
        return '?';
    }

    public static void main(String[] args) throws Exception {
        List<Map<String, Object>> propertySets = new ArrayList<>();
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            String[] fields = line.split("\t", -1);
            if (fields[0].equals("P")) {
                Map<String, Object> properties = new HashMap<>();
                for (int i = 1; i + 1 < fields.length; i += 2) {
                    properties.put(unescape(fields[i]), unescape(fields[i + 1]));
                }
                propertySets.add(properties);
            } else if (fields[0].equals("E")) {
                BooleanExpression expression;
                try {
                    expression = SelectorParser.parse(unescape(fields[1]));
                } catch (Throwable t) {
                    out.append("ERR\n");
                    continue;
                }
                out.append("OK\t");
                for (Map<String, Object> properties : propertySets) {
                    out.append(outcome(expression, properties));
                }
                out.append('\n');
            }
        }
        Files.write(Paths.get(args[1]), out.toString().getBytes(StandardCharsets.UTF_8));
    }
}
