import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Our own probe for the RocketMQ 5.x gRPC Java client (rocketmq-clients, built by build.sh)
 * against rocketstore's --grpc-listen. One JSON line per event on stdout; exit 0 when the
 * subcommand got what it was asked for.
 *
 *   produce ENDPOINT TOPIC N           message i: body "body-i", tag tagA/tagB/tagC (i % 3), keys
 *                                      "k<i>" "kk<i>", property custom=v<i>; PROBE_GROUPS=G gives it
 *                                      the message group "g<i % G>" (FIFO); PROBE_DELIVER_IN_MS=D a
 *                                      delivery timestamp D ms from now; PROBE_ASYNC=1 sendAsync
 *   tx ENDPOINT TOPIC SECS             a transactional producer whose checker answers COMMIT: sends
 *                                      "commit" (committed), "rollback" (rolled back), "unknown"
 *                                      (left open: the broker checks it back), then waits up to SECS
 *                                      for the check
 *   simple ENDPOINT TOPIC GROUP N SECS [TAGEXPR]   SimpleConsumer: receive (PROBE_BATCH, 16;
 *                                      invisible PROBE_INVISIBLE_S, 30 s), ack, until N distinct
 *                                      messages are acked; PROBE_CHANGE_INVISIBLE_S=S: the first
 *                                      message delivered is not acked but given S seconds by
 *                                      changeInvisibleDuration, and acked when it comes again
 *   push ENDPOINT TOPIC GROUP N SECS [TAGEXPR]     PushConsumer until N distinct messages are
 *                                      consumed (PROBE_FAIL_FIRST=1: the first one is answered
 *                                      FAILURE once); prints its client id first ("started")
 *
 * PROBE_SSL=1 enables TLS (the client's default; off here unless asked; the client trusts any
 * server certificate); PROBE_NAMESPACE; PROBE_ACCESS_KEY/PROBE_SECRET_KEY sign every request
 * (the client's MQv2-HMAC-SHA1 authorization header).
 */
public class Grpc5Probe {
    static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    public static void main(String[] args) throws Exception {
        int rc;
        switch (args[0]) {
            case "produce": rc = produce(args[1], args[2], Integer.parseInt(args[3])); break;
            case "tx": rc = tx(args[1], args[2], Integer.parseInt(args[3])); break;
            case "simple": rc = simple(args[1], args[2], args[3], Integer.parseInt(args[4]),
                Integer.parseInt(args[5]), args.length > 6 ? args[6] : "*"); break;
            case "push": rc = push(args[1], args[2], args[3], Integer.parseInt(args[4]),
                Integer.parseInt(args[5]), args.length > 6 ? args[6] : "*"); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
        // The client's executors are not all daemons: leave without waiting for them.
        Runtime.getRuntime().halt(rc);
    }

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static ClientConfiguration config(String endpoint) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder().setEndpoints(endpoint)
            .enableSsl("1".equals(env("PROBE_SSL", "0")))
            .setNamespace(env("PROBE_NAMESPACE", ""))
            .setRequestTimeout(Duration.ofSeconds(10));
        String accessKey = env("PROBE_ACCESS_KEY", "");
        if (!accessKey.isEmpty()) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(accessKey, env("PROBE_SECRET_KEY", "")));
        }
        return b.build();
    }

    static Message message(String topic, int i, String body) {
        MessageBuilder b = PROVIDER.newMessageBuilder().setTopic(topic)
            .setBody(body.getBytes(StandardCharsets.UTF_8))
            .setTag(new String[] {"tagA", "tagB", "tagC"}[i % 3]).setKeys("k" + i, "kk" + i)
            .addProperty("custom", "v" + i);
        int groups = Integer.parseInt(env("PROBE_GROUPS", "0"));
        if (groups > 0) {
            b.setMessageGroup("g" + (i % groups));
        }
        long deliverIn = Long.parseLong(env("PROBE_DELIVER_IN_MS", "0"));
        if (deliverIn > 0) {
            b.setDeliveryTimestamp(System.currentTimeMillis() + deliverIn);
        }
        return b.build();
    }

    static int produce(String endpoint, String topic, int n) throws Exception {
        boolean async = "1".equals(env("PROBE_ASYNC", "0"));
        int failed = 0;
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(endpoint))
            .setTopics(topic).build()) {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i, "body-" + i);
                try {
                    SendReceipt r = async ? producer.sendAsync(m).get(30, TimeUnit.SECONDS) : producer.send(m);
                    out("sent", "i", i, "messageId", r.getMessageId().toString(),
                        "group", m.getMessageGroup().orElse(null),
                        "deliveryTimestamp", m.getDeliveryTimestamp().orElse(null),
                        "sentAt", System.currentTimeMillis());
                } catch (Exception e) {
                    failed++;
                    out("send-error", "i", i, "exception", String.valueOf(e));
                }
            }
        }
        return failed == 0 ? 0 : 1;
    }

    static int tx(String endpoint, String topic, int secs) throws Exception {
        CountDownLatch checked = new CountDownLatch(1);
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(endpoint))
            .setTopics(topic).setTransactionChecker(view -> {
                out("check", "messageId", view.getMessageId().toString(), "body", body(view));
                checked.countDown();
                return TransactionResolution.COMMIT;
            }).build()) {
            String[] kinds = {"commit", "rollback", "unknown"};
            for (int i = 0; i < kinds.length; i++) {
                Transaction t = producer.beginTransaction();
                SendReceipt r = producer.send(message(topic, i, kinds[i]), t);
                out("sent", "i", i, "body", kinds[i], "messageId", r.getMessageId().toString());
                if (i == 0) {
                    t.commit();
                } else if (i == 1) {
                    t.rollback();
                }
            }
            boolean ok = checked.await(secs, TimeUnit.SECONDS);
            Thread.sleep(1000);
            return ok ? 0 : 1;
        }
    }

    static Map<String, FilterExpression> subscription(String topic, String expr) {
        return Collections.singletonMap(topic, new FilterExpression(expr, FilterExpressionType.TAG));
    }

    static int simple(String endpoint, String topic, String group, int n, int secs, String expr) throws Exception {
        int batch = Integer.parseInt(env("PROBE_BATCH", "16"));
        Duration invisible = Duration.ofSeconds(Long.parseLong(env("PROBE_INVISIBLE_S", "30")));
        long change = Long.parseLong(env("PROBE_CHANGE_INVISIBLE_S", "0"));
        String changed = null;
        Set<String> acked = ConcurrentHashMap.newKeySet();
        long end = System.currentTimeMillis() + secs * 1000L;
        try (SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config(endpoint))
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(subscription(topic, expr)).build()) {
            while (acked.size() < n && System.currentTimeMillis() < end) {
                List<MessageView> got = consumer.receive(batch, invisible);
                for (MessageView m : got) {
                    recv(m, "simple");
                    String id = m.getMessageId().toString();
                    if (change > 0 && changed == null) {
                        changed = id;
                        consumer.changeInvisibleDuration(m, Duration.ofSeconds(change));
                        out("changed", "messageId", id, "seconds", change, "at", System.currentTimeMillis());
                        continue;
                    }
                    consumer.ack(m);
                    acked.add(id);
                    out("acked", "messageId", id);
                }
            }
            out("done", "distinct", acked.size());
        }
        return acked.size() >= n ? 0 : 1;
    }

    static int push(String endpoint, String topic, String group, int n, int secs, String expr) throws Exception {
        Set<String> seen = ConcurrentHashMap.newKeySet();
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        boolean failFirst = "1".equals(env("PROBE_FAIL_FIRST", "0"));
        CountDownLatch enough = new CountDownLatch(n);
        try (PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config(endpoint))
            .setConsumerGroup(group).setSubscriptionExpressions(subscription(topic, expr))
            .setMessageListener(m -> {
                recv(m, "push");
                String id = m.getMessageId().toString();
                if (failFirst && failedOnce.isEmpty() && failedOnce.add(id)) {
                    return ConsumeResult.FAILURE;
                }
                if (seen.add(id)) {
                    enough.countDown();
                }
                return ConsumeResult.SUCCESS;
            }).build()) {
            // The client id the broker knows it by (x-mq-client-id): mqadmin asks about it.
            out("started", "clientId",
                ((org.apache.rocketmq.client.java.impl.ClientImpl) consumer).getClientId().toString());
            enough.await(secs, TimeUnit.SECONDS);
            // Linger a little: the acks of the last messages go out, and a redelivery would show.
            Thread.sleep(Long.parseLong(env("PROBE_LINGER_MS", "2000")));
            out("done", "distinct", seen.size());
        }
        return seen.size() >= n ? 0 : 1;
    }

    static String body(MessageView m) {
        ByteBuffer b = m.getBody().duplicate();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static void recv(MessageView m, String via) {
        out("recv", "via", via, "messageId", m.getMessageId().toString(), "topic", m.getTopic(),
            "body", body(m), "tag", m.getTag().orElse(null), "keys", m.getKeys(),
            "props", new TreeMap<>(m.getProperties()), "group", m.getMessageGroup().orElse(null),
            "deliveryTimestamp", m.getDeliveryTimestamp().orElse(null),
            "deliveryAttempt", m.getDeliveryAttempt(), "bornTimestamp", m.getBornTimestamp(),
            "bornHost", m.getBornHost(), "recvAt", System.currentTimeMillis());
    }

    static synchronized void out(String event, Object... kv) {
        StringBuilder sb = new StringBuilder("{\"event\":").append(json(event));
        for (int i = 0; i < kv.length; i += 2) {
            sb.append(',').append(json(kv[i])).append(':').append(json(kv[i + 1]));
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                sb.append(sb.length() > 1 ? "," : "").append(json(e.getKey())).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (v instanceof Iterable) {
            StringBuilder sb = new StringBuilder("[");
            for (Object o : (Iterable<?>) v) {
                sb.append(sb.length() > 1 ? "," : "").append(json(o));
            }
            return sb.append(']').toString();
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char c : v.toString().toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
