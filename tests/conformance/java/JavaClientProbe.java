// rocketstore's probe of a broker with the real Apache RocketMQ 4.9.8 Java client.
// Our own code (not copied from RocketMQ). Prints one JSON object per line on stdout per event.
//
//   produce NAMESRV TOPIC COUNT [GROUP]
//   consume NAMESRV TOPIC GROUP EXPECT SECONDS [EXPRESSION]   (EXPRESSION "sql:..." = SQL92;
//           EXPECT 0 = watch SECONDS that nothing arrives)
//   tx      NAMESRV TOPIC GROUP [SECONDS]
//   query   NAMESRV TOPIC KEY
//   view    NAMESRV TOPIC MSGID
//
// Exit status: 0 when every step worked (all sent / EXPECT acknowledged), 1 otherwise, 2 on usage.
//
// Optional knobs (environment variables):
//   PROBE_BODY_BYTES=N        produce: pad each body with 'x' to N bytes (> 4096 makes the client
//                             compress it: sysFlag COMPRESSED, zlib by default)
//   PROBE_DELAY_LEVEL=L       produce: msg.setDelayTimeLevel(L) (1s 5s 10s 30s 1m ...)
//   PROBE_BATCH=1             produce: send the COUNT messages as one batch (SEND_BATCH_MESSAGE)
//   PROBE_ORDERLY=1           consume: MessageListenerOrderly (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ)
//   PROBE_RECONSUME_LATER=N   consume: answer RECONSUME_LATER (orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT)
//                             while a message's reconsumeTimes < N; EXPECT counts acknowledged
//                             messages only
//   PROBE_BROADCAST=1         consume: MessageModel.BROADCASTING (offsets kept locally)

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

public final class JavaClientProbe {

    private JavaClientProbe() {
    }

    // ------------------------------------------------------------------ tiny JSON line writer

    private static final class Line {
        private final StringBuilder sb = new StringBuilder("{");

        Line(String event) {
            put("event", event);
        }

        Line put(String key, Object value) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            quote(sb, key);
            sb.append(':');
            value(sb, value);
            return this;
        }

        void print() {
            String s = sb.toString() + "}";
            synchronized (System.out) {
                System.out.println(s);
                System.out.flush();
            }
        }

        private static void value(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : new TreeMap<Object, Object>((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    quote(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    value(sb, e.getValue());
                }
                sb.append('}');
            } else {
                quote(sb, v.toString());
            }
        }

        private static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c == '\n') {
                    sb.append("\\n");
                } else if (c == '\r') {
                    sb.append("\\r");
                } else if (c == '\t') {
                    sb.append("\\t");
                } else if (c < 0x20) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        }
    }

    private static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- caused by ");
            }
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) {
                break;
            }
        }
        return sb.toString();
    }

    private static String stack(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    private static void error(String stage, Throwable t) {
        new Line("error").put("stage", stage).put("exception", describe(t)).print();
        System.err.println("[probe] " + stage + ": " + stack(t));
    }

    private static String body(MessageExt m) {
        return m.getBody() == null ? null : new String(m.getBody(), StandardCharsets.UTF_8);
    }

    /** The id built from store host + commit log offset (MessageClientExt's msgId is UNIQ_KEY). */
    private static String offsetMsgId(MessageExt m) {
        return m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId();
    }

    private static Line recvLine(String event, MessageExt m) {
        return new Line(event)
            .put("msgId", m.getMsgId())
            .put("offsetMsgId", offsetMsgId(m))
            .put("topic", m.getTopic())
            .put("queueId", m.getQueueId())
            .put("queueOffset", m.getQueueOffset())
            .put("commitLogOffset", m.getCommitLogOffset())
            .put("body", body(m))
            .put("tags", m.getTags())
            .put("keys", m.getKeys())
            .put("props", m.getProperties())
            .put("reconsumeTimes", m.getReconsumeTimes())
            .put("bornTimestamp", m.getBornTimestamp())
            .put("storeTimestamp", m.getStoreTimestamp());
    }

    // ------------------------------------------------------------------ produce

    private static int produce(String namesrv, String topic, int count, String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        // a first send over TLS pays two handshakes out of the client's 3 s on a loaded machine
        producer.setSendMsgTimeout(intEnv("PROBE_SEND_TIMEOUT_MS", 3000));
        producer.start();
        new Line("started").put("role", "producer").put("group", group)
            .put("clientId", producer.buildMQClientId()).print();
        int failures = 0;
        int bodyBytes = intEnv("PROBE_BODY_BYTES", 0);
        try {
            List<Message> msgs = new ArrayList<Message>();
            for (int i = 0; i < count; i++) {
                StringBuilder b = new StringBuilder("body-" + i);
                while (b.length() < bodyBytes) {
                    b.append('x');
                }
                Message msg = new Message(topic, "tag" + (i % 3), "k" + i, b.toString().getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("custom", "v" + i);
                if (intEnv("PROBE_DELAY_LEVEL", 0) > 0) {
                    msg.setDelayTimeLevel(intEnv("PROBE_DELAY_LEVEL", 0));
                }
                msgs.add(msg);
            }
            if (intEnv("PROBE_BATCH", 0) != 0) {
                try {
                    SendResult r = producer.send(msgs);
                    String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                    String[] offIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                    for (int i = 0; i < count; i++) {
                        new Line("sent").put("i", i).put("batch", true)
                            .put("msgId", i < ids.length ? ids[i] : null)
                            .put("offsetMsgId", i < offIds.length ? offIds[i] : null)
                            .put("brokerName", r.getMessageQueue().getBrokerName())
                            .put("queueId", r.getMessageQueue().getQueueId())
                            .put("queueOffset", r.getQueueOffset() + i)
                            .put("status", r.getSendStatus())
                            .print();
                    }
                    if (ids.length != count || offIds.length != count) {
                        failures++;
                        new Line("send-error").put("batch", true).put("exception", "batch answered "
                            + ids.length + " msgIds / " + offIds.length + " offsetMsgIds for " + count + " messages")
                            .print();
                    }
                } catch (Exception e) {
                    failures = count;
                    new Line("send-error").put("batch", true).put("exception", describe(e)).print();
                    System.err.println("[probe] batch send: " + stack(e));
                }
            } else {
                for (int i = 0; i < count; i++) {
                    try {
                        SendResult r = producer.send(msgs.get(i));
                        new Line("sent").put("i", i)
                            .put("msgId", r.getMsgId())
                            .put("offsetMsgId", r.getOffsetMsgId())
                            .put("brokerName", r.getMessageQueue().getBrokerName())
                            .put("queueId", r.getMessageQueue().getQueueId())
                            .put("queueOffset", r.getQueueOffset())
                            .put("status", r.getSendStatus())
                            .put("regionId", r.getRegionId())
                            .print();
                    } catch (Exception e) {
                        failures++;
                        new Line("send-error").put("i", i).put("exception", describe(e)).print();
                        System.err.println("[probe] send " + i + ": " + stack(e));
                    }
                }
            }
        } finally {
            producer.shutdown();
        }
        new Line("done").put("sent", count - failures).put("failed", failures).print();
        return failures == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ consume

    private static int consume(String namesrv, String topic, String group, int expect, int seconds,
        String expression) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (expression != null && expression.toLowerCase().startsWith("sql:")) {
            consumer.subscribe(topic, MessageSelector.bySql(expression.substring(4)));
        } else {
            consumer.subscribe(topic, expression == null ? "*" : expression);
        }
        if (intEnv("PROBE_BROADCAST", 0) != 0) {
            consumer.setMessageModel(MessageModel.BROADCASTING);
        }
        final int laterUntil = intEnv("PROBE_RECONSUME_LATER", 0);
        final CountDownLatch enough = new CountDownLatch(Math.max(expect, 0));
        final AtomicInteger received = new AtomicInteger();
        final AtomicInteger deliveries = new AtomicInteger();
        final Map<String, Boolean> seen = new ConcurrentHashMap<String, Boolean>();
        final AtomicInteger duplicates = new AtomicInteger();
        // Both listeners: a message asked to come back later ends the batch unacknowledged;
        // otherwise the whole batch is acknowledged and counted.
        final class Acks {
            boolean later(List<MessageExt> msgs, String ack) {
                for (MessageExt m : msgs) {
                    deliveries.incrementAndGet();
                    if (m.getReconsumeTimes() < laterUntil) {
                        recvLine("recv", m).put("ack", ack).print();
                        return true;
                    }
                }
                return false;
            }

            void accept(List<MessageExt> msgs) {
                for (MessageExt m : msgs) {
                    if (seen.put(m.getMsgId(), Boolean.TRUE) != null) {
                        duplicates.incrementAndGet();
                    }
                    recvLine("recv", m).put("ack", "success").print();
                    received.incrementAndGet();
                    enough.countDown();
                }
            }
        }
        final Acks acks = new Acks();
        if (intEnv("PROBE_ORDERLY", 0) != 0) {
            consumer.registerMessageListener(new MessageListenerOrderly() {
                @Override
                public ConsumeOrderlyStatus consumeMessage(List<MessageExt> msgs, ConsumeOrderlyContext context) {
                    if (acks.later(msgs, "suspend")) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                    acks.accept(msgs);
                    return ConsumeOrderlyStatus.SUCCESS;
                }
            });
        } else {
            consumer.registerMessageListener(new MessageListenerConcurrently() {
                @Override
                public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs,
                    ConsumeConcurrentlyContext context) {
                    if (acks.later(msgs, "later")) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                    acks.accept(msgs);
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                }
            });
        }
        consumer.start();
        new Line("started").put("role", "consumer").put("group", group)
            .put("clientId", consumer.buildMQClientId()).print();
        boolean complete;
        if (expect <= 0) {
            Thread.sleep(seconds * 1000L); // EXPECT 0: watch the whole time that nothing arrives
            complete = received.get() == 0;
        } else {
            complete = enough.await(seconds, TimeUnit.SECONDS);
        }
        // let offsets of what was just consumed reach the broker before shutdown persists them
        Thread.sleep(200);
        consumer.shutdown();
        new Line("done").put("received", received.get()).put("deliveries", deliveries.get())
            .put("distinct", seen.size())
            .put("duplicates", duplicates.get()).put("expected", expect).put("timedOut", !complete).print();
        return expect <= 0 ? (received.get() == 0 ? 0 : 1) : (received.get() >= expect ? 0 : 1);
    }

    // ------------------------------------------------------------------ tx

    private static int tx(String namesrv, String topic, String group, int seconds) throws Exception {
        final AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String b = new String(msg.getBody(), StandardCharsets.UTF_8);
                LocalTransactionState state;
                if ("commit".equals(b)) {
                    state = LocalTransactionState.COMMIT_MESSAGE;
                } else if ("rollback".equals(b)) {
                    state = LocalTransactionState.ROLLBACK_MESSAGE;
                } else {
                    state = LocalTransactionState.UNKNOW;
                }
                new Line("local-tx").put("body", b).put("transactionId", msg.getTransactionId())
                    .put("state", state).print();
                return state;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.incrementAndGet();
                recvLine("check", msg).put("transactionId", msg.getTransactionId())
                    .put("answer", LocalTransactionState.COMMIT_MESSAGE).print();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        new Line("started").put("role", "tx-producer").put("group", group)
            .put("clientId", producer.buildMQClientId()).print();
        int failures = 0;
        String[] bodies = {"commit", "rollback", "unknown"};
        for (int i = 0; i < bodies.length; i++) {
            Message msg = new Message(topic, "txtag", "tx-" + bodies[i],
                bodies[i].getBytes(StandardCharsets.UTF_8));
            msg.putUserProperty("custom", "tx" + i);
            try {
                TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                new Line("tx-sent").put("i", i).put("body", bodies[i])
                    .put("sendStatus", r.getSendStatus())
                    .put("localTransactionState", r.getLocalTransactionState())
                    .put("msgId", r.getMsgId())
                    .put("offsetMsgId", r.getOffsetMsgId())
                    .put("transactionId", r.getTransactionId())
                    .put("queueId", r.getMessageQueue() == null ? null : r.getMessageQueue().getQueueId())
                    .put("queueOffset", r.getQueueOffset())
                    .print();
            } catch (Exception e) {
                failures++;
                new Line("tx-error").put("i", i).put("body", bodies[i]).put("exception", describe(e)).print();
                System.err.println("[probe] tx send " + i + ": " + stack(e));
            }
        }
        new Line("waiting").put("seconds", seconds).print();
        Thread.sleep(seconds * 1000L);
        producer.shutdown();
        new Line("done").put("failed", failures).put("checks", checks.get()).print();
        return failures == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ query / view

    @SuppressWarnings("deprecation")
    private static int query(String namesrv, String topic, String key) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("probe_query_group");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        int rc = 0;
        try {
            long now = System.currentTimeMillis();
            QueryResult result = producer.queryMessage(topic, key, 32, 0, now + 60_000L);
            for (MessageExt m : result.getMessageList()) {
                recvLine("found", m).print();
            }
            new Line("done").put("found", result.getMessageList().size())
                .put("indexLastUpdateTimestamp", result.getIndexLastUpdateTimestamp()).print();
            if (!result.getMessageList().isEmpty()) {
                // viewMessage by the offset message id the query answered with
                String offsetMsgId = offsetMsgId(result.getMessageList().get(0));
                try {
                    MessageExt m = producer.viewMessage(offsetMsgId);
                    recvLine("viewed", m).print();
                } catch (Exception e) {
                    rc = 1;
                    error("viewMessage(" + offsetMsgId + ")", e);
                }
            }
        } finally {
            producer.shutdown();
        }
        return rc;
    }

    @SuppressWarnings("deprecation")
    private static int view(String namesrv, String topic, String msgId) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("probe_query_group");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        try {
            MessageExt m = producer.viewMessage(topic, msgId);
            recvLine("viewed", m).print();
        } finally {
            producer.shutdown();
        }
        return 0;
    }

    // ------------------------------------------------------------------ main

    private static void usage() {
        System.err.println("usage:\n"
            + "  produce NAMESRV TOPIC COUNT [GROUP]\n"
            + "  consume NAMESRV TOPIC GROUP EXPECT SECONDS [EXPRESSION|sql:SQL92]\n"
            + "  tx      NAMESRV TOPIC GROUP [SECONDS(90)]\n"
            + "  query   NAMESRV TOPIC KEY\n"
            + "  view    NAMESRV TOPIC MSGID");
        System.exit(2);
    }

    public static void main(String[] args) {
        // before any client class is loaded: the client's own file logger, no slf4j
        setDefault("rocketmq.client.logUseSlf4j", "false");
        setDefault("rocketmq.client.logRoot", System.getProperty("java.io.tmpdir") + "/rocketstore-java-client/logs");
        setDefault("rocketmq.client.logLevel", "INFO");
        // broadcasting consumers keep offsets in files (default ~/.rocketmq_offsets)
        setDefault("rocketmq.client.localOffsetStoreDir", System.getProperty("java.io.tmpdir") + "/rocketstore-java-client/local-offsets");
        if (args.length < 1) {
            usage();
        }
        int rc;
        try {
            switch (args[0]) {
                case "produce":
                    if (args.length < 4) {
                        usage();
                    }
                    rc = produce(args[1], args[2], Integer.parseInt(args[3]),
                        args.length > 4 ? args[4] : "probe_producer_group");
                    break;
                case "consume":
                    if (args.length < 6) {
                        usage();
                    }
                    rc = consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        args.length > 6 ? args[6] : null);
                    break;
                case "tx":
                    if (args.length < 4) {
                        usage();
                    }
                    rc = tx(args[1], args[2], args[3], args.length > 4 ? Integer.parseInt(args[4]) : 90);
                    break;
                case "query":
                    if (args.length < 4) {
                        usage();
                    }
                    rc = query(args[1], args[2], args[3]);
                    break;
                case "view":
                    if (args.length < 4) {
                        usage();
                    }
                    rc = view(args[1], args[2], args[3]);
                    break;
                default:
                    usage();
                    rc = 2;
            }
        } catch (Throwable t) {
            error(args[0], t);
            rc = 1;
        }
        System.out.flush();
        // client threads (netty, timers) may linger after shutdown; leave decisively
        System.exit(rc);
    }

    private static int intEnv(String name, int dflt) {
        String v = System.getenv(name);
        return v == null || v.trim().isEmpty() ? dflt : Integer.parseInt(v.trim());
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }
}
