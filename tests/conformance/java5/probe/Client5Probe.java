// Probe of rocketstore's broker with the real Apache RocketMQ 5.3.3 remoting Java client.
// Derived from rocketstore's tests/conformance/java/JavaClientProbe.java (our own code), extended.
// One JSON object per line on stdout per event. Every request whose answer is not SUCCESS (and,
// with PROBE_TRACE=1, every request) is printed as an "rpc" line by an RPCHook.
//
//   produce  NAMESRV TOPIC COUNT [GROUP]       PROBE_MODE=sync|async|oneway|batch|selector
//            PROBE_TAGS=tagA,tagB,tagC  PROBE_BIG=i (message i gets a 5000-byte body)
//            PROBE_DELAY_LEVEL=L  PROBE_DELIVER_IN_MS=ms (setDeliverTimeMs(now+ms))
//            PROBE_DELAY_SEC=s (setDelayTimeSec)
//   consume  NAMESRV TOPIC GROUP EXPECT SECONDS [EXPR]   PROBE_ORDERLY PROBE_BROADCAST PROBE_RECONSUME_LATER
//   lite     NAMESRV TOPIC GROUP EXPECT SECONDS [EXPR]   DefaultLitePullConsumer subscribe + poll
//   assign   NAMESRV TOPIC GROUP EXPECT SECONDS [SEEK]   assign all queues, seek(mq, SEEK) (default 0), poll
//   tx       NAMESRV TOPIC GROUP [SECONDS]
//   query    NAMESRV TOPIC KEY        queryMessage then viewMessage(topic, offsetMsgId) and (topic, msgId)
//   view     NAMESRV TOPIC MSGID
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
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
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public final class Client5Probe {
    private Client5Probe() {
    }

    static final class Line {
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

    static final boolean TRACE = intEnv("PROBE_TRACE", 0) != 0;
    static final boolean REWRITE_361 = intEnv("PROBE_REWRITE_361", 0) != 0;

    /** Prints failing answers (all answers with PROBE_TRACE=1). Pull "not found" answers are skipped unless tracing. */
    static final RPCHook HOOK = new RPCHook() {
        @Override
        public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
            if (REWRITE_361 && request.getCode() == 361) {
                request.setCode(11); // diagnostic only: LITE_PULL_MESSAGE sent as PULL_MESSAGE
            }
            if (TRACE) {
                new Line("rpc-req").put("addr", remoteAddr).put("code", request.getCode())
                    .put("opaque", request.getOpaque()).put("flag", request.getFlag())
                    .put("version", request.getVersion())
                    .put("ext", request.getExtFields()).put("bodyLen", request.getBody() == null ? 0 : request.getBody().length)
                    .print();
            }
        }

        @Override
        public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
            if (response == null) {
                if (request.getCode() == 40) {
                    return; // NOTIFY_CONSUMER_IDS_CHANGED from the broker (oneway): no answer by design
                }
                new Line("rpc").put("addr", remoteAddr).put("code", request.getCode()).put("response", null).print();
                return;
            }
            int c = response.getCode();
            boolean pullMiss = request.getCode() == 11 && (c == 19 || c == 20);
            if (TRACE || (c != 0 && !pullMiss)) {
                Line l = new Line("rpc").put("addr", remoteAddr).put("code", request.getCode())
                    .put("opaque", request.getOpaque())
                    .put("respCode", c).put("remark", response.getRemark())
                    .put("respExt", response.getExtFields())
                    .put("respBodyLen", response.getBody() == null ? 0 : response.getBody().length);
                if (c != 0 || TRACE) {
                    l.put("reqExt", request.getExtFields());
                }
                if (TRACE && response.getBody() != null && response.getBody().length < 2000 && request.getCode() != 11) {
                    l.put("respBody", new String(response.getBody(), StandardCharsets.UTF_8));
                }
                if (TRACE && request.getBody() != null && request.getBody().length < 2000 && request.getCode() != 10 && request.getCode() != 310 && request.getCode() != 320) {
                    l.put("reqBody", new String(request.getBody(), StandardCharsets.UTF_8));
                }
                l.print();
            }
        }
    };

    static String describe(Throwable t) {
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

    static String stack(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    static void error(String stage, Throwable t) {
        new Line("error").put("stage", stage).put("exception", describe(t)).print();
        System.err.println("[probe] " + stage + ": " + stack(t));
    }

    static String body(MessageExt m) {
        if (m.getBody() == null) {
            return null;
        }
        String b = new String(m.getBody(), StandardCharsets.UTF_8);
        return b.length() > 64 ? b.substring(0, 20) + "...(" + b.length() + " chars)" : b;
    }

    static String offsetMsgId(MessageExt m) {
        return m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId();
    }

    static Line recvLine(String event, MessageExt m) {
        return new Line(event)
            .put("msgId", m.getMsgId())
            .put("offsetMsgId", offsetMsgId(m))
            .put("topic", m.getTopic())
            .put("queueId", m.getQueueId())
            .put("queueOffset", m.getQueueOffset())
            .put("commitLogOffset", m.getCommitLogOffset())
            .put("sysFlag", m.getSysFlag())
            .put("body", body(m))
            .put("bodyLen", m.getBody() == null ? -1 : m.getBody().length)
            .put("tags", m.getTags())
            .put("keys", m.getKeys())
            .put("props", m.getProperties())
            .put("reconsumeTimes", m.getReconsumeTimes())
            .put("bornTimestamp", m.getBornTimestamp())
            .put("storeTimestamp", m.getStoreTimestamp())
            .put("recvAt", System.currentTimeMillis());
    }

    static Line sentLine(int i, SendResult r) {
        return new Line("sent").put("i", i)
            .put("msgId", r.getMsgId())
            .put("offsetMsgId", r.getOffsetMsgId())
            .put("brokerName", r.getMessageQueue() == null ? null : r.getMessageQueue().getBrokerName())
            .put("queueId", r.getMessageQueue() == null ? null : r.getMessageQueue().getQueueId())
            .put("queueOffset", r.getQueueOffset())
            .put("status", r.getSendStatus())
            .put("regionId", r.getRegionId())
            .put("transactionId", r.getTransactionId())
            .put("recallHandle", r.getRecallHandle())
            .put("at", System.currentTimeMillis());
    }

    // ------------------------------------------------------------------ produce

    static int produce(String namesrv, String topic, int count, String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group, HOOK);
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        producer.start();
        new Line("started").put("role", "producer").put("group", group)
            .put("clientId", producer.buildMQClientId())
            .put("useHeartbeatV2", producer.isUseHeartbeatV2())
            .put("enableStreamRequestType", producer.isEnableStreamRequestType()).print();
        String mode = System.getenv().getOrDefault("PROBE_MODE", "sync");
        String[] tags = System.getenv().getOrDefault("PROBE_TAGS", "tagA,tagB,tagC").split(",");
        int big = intEnv("PROBE_BIG", 5);
        final AtomicInteger failures = new AtomicInteger();
        try {
            List<Message> msgs = new ArrayList<Message>();
            for (int i = 0; i < count; i++) {
                StringBuilder b = new StringBuilder("body-" + i);
                if (i == big) {
                    while (b.length() < 5000) {
                        b.append((char) ('a' + b.length() % 26));
                    }
                }
                Message msg = new Message(topic, tags[i % tags.length], "k" + i + " kk" + i,
                    b.toString().getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("custom", "v" + i);
                if (intEnv("PROBE_DELAY_LEVEL", 0) > 0) {
                    msg.setDelayTimeLevel(intEnv("PROBE_DELAY_LEVEL", 0));
                }
                if (intEnv("PROBE_DELIVER_IN_MS", 0) > 0) {
                    msg.setDeliverTimeMs(System.currentTimeMillis() + intEnv("PROBE_DELIVER_IN_MS", 0));
                }
                if (intEnv("PROBE_DELAY_SEC", 0) > 0) {
                    msg.setDelayTimeSec(intEnv("PROBE_DELAY_SEC", 0));
                }
                msgs.add(msg);
            }
            if ("batch".equals(mode)) {
                try {
                    SendResult r = producer.send(msgs);
                    String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                    String[] offIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                    sentLine(-1, r).put("batch", true).print();
                    new Line("batch-ids").put("msgIds", ids.length).put("offsetMsgIds", offIds.length).print();
                    if (ids.length != count || offIds.length != count) {
                        failures.incrementAndGet();
                    }
                } catch (Exception e) {
                    failures.set(count);
                    new Line("send-error").put("batch", true).put("exception", describe(e)).print();
                    System.err.println("[probe] batch send: " + stack(e));
                }
            } else if ("async".equals(mode)) {
                final CountDownLatch done = new CountDownLatch(count);
                for (int i = 0; i < count; i++) {
                    final int n = i;
                    producer.send(msgs.get(i), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            sentLine(n, r).put("async", true).print();
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            failures.incrementAndGet();
                            new Line("send-error").put("i", n).put("async", true).put("exception", describe(e)).print();
                            System.err.println("[probe] async send " + n + ": " + stack(e));
                            done.countDown();
                        }
                    });
                }
                if (!done.await(30, TimeUnit.SECONDS)) {
                    new Line("async-timeout").put("outstanding", done.getCount()).print();
                    failures.addAndGet((int) done.getCount());
                }
            } else {
                for (int i = 0; i < count; i++) {
                    try {
                        if ("oneway".equals(mode)) {
                            producer.sendOneway(msgs.get(i));
                            new Line("sent-oneway").put("i", i).print();
                        } else if ("selector".equals(mode)) {
                            SendResult r = producer.send(msgs.get(i), new MessageQueueSelector() {
                                @Override
                                public MessageQueue select(List<MessageQueue> mqs, Message msg, Object arg) {
                                    return mqs.get((Integer) arg % mqs.size());
                                }
                            }, i % 2);
                            sentLine(i, r).print();
                        } else {
                            sentLine(i, producer.send(msgs.get(i))).print();
                        }
                    } catch (Exception e) {
                        failures.incrementAndGet();
                        new Line("send-error").put("i", i).put("exception", describe(e)).print();
                        System.err.println("[probe] send " + i + ": " + stack(e));
                    }
                }
            }
        } finally {
            producer.shutdown();
        }
        new Line("done").put("sent", count - failures.get()).put("failed", failures.get()).print();
        return failures.get() == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ consume (push)

    static int consume(String namesrv, String topic, String group, int expect, int seconds,
        String expression) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, HOOK);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (intEnv("PROBE_CLIENT_REBALANCE", 1) == 0) {
            consumer.setClientRebalance(false); // 5.x: ask the broker (QUERY_ASSIGNMENT) / pop mode
        }
        if (intEnv("PROBE_HB_MS", 0) > 0) {
            consumer.setHeartbeatBrokerInterval(intEnv("PROBE_HB_MS", 0));
        }
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
        final class Acks {
            boolean later(List<MessageExt> msgs, String ack) {
                for (MessageExt m : msgs) {
                    deliveries.incrementAndGet();
                    if (m.getReconsumeTimes() < laterUntil) {
                        recvLine("recv", m).put("ack", ack).put("thread", Thread.currentThread().getName()).print();
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
                    recvLine("recv", m).put("ack", "success").put("thread", Thread.currentThread().getName()).print();
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
            .put("clientId", consumer.buildMQClientId())
            .put("useHeartbeatV2", consumer.isUseHeartbeatV2())
            .put("enableStreamRequestType", consumer.isEnableStreamRequestType()).print();
        boolean complete;
        if (expect <= 0) {
            Thread.sleep(seconds * 1000L);
            complete = received.get() == 0;
        } else {
            complete = enough.await(seconds, TimeUnit.SECONDS);
        }
        Thread.sleep(intEnv("PROBE_LINGER_MS", 200));
        consumer.shutdown();
        new Line("done").put("received", received.get()).put("deliveries", deliveries.get())
            .put("distinct", seen.size())
            .put("duplicates", duplicates.get()).put("expected", expect).put("timedOut", !complete).print();
        return expect <= 0 ? (received.get() == 0 ? 0 : 1) : (received.get() >= expect ? 0 : 1);
    }

    // ------------------------------------------------------------------ lite pull

    static int lite(String namesrv, String topic, String group, int expect, int seconds, String expr,
        boolean assign, long seekTo) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group, HOOK);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAutoCommit(intEnv("PROBE_AUTOCOMMIT", 1) != 0);
        if (intEnv("PROBE_BROADCAST", 0) != 0) {
            c.setMessageModel(MessageModel.BROADCASTING);
        }
        Collection<MessageQueue> mqs = null;
        if (!assign) {
            c.subscribe(topic, expr == null ? "*" : expr);
        }
        c.start();
        new Line("started").put("role", assign ? "lite-assign" : "lite-subscribe").put("group", group)
            .put("clientId", c.buildMQClientId())
            .put("useHeartbeatV2", c.isUseHeartbeatV2())
            .put("enableStreamRequestType", c.isEnableStreamRequestType()).print();
        int received = 0;
        int dups = 0;
        Map<String, Boolean> seen = new ConcurrentHashMap<String, Boolean>();
        try {
            if (assign) {
                mqs = c.fetchMessageQueues(topic);
                new Line("queues").put("mqs", mqs.toString()).print();
                c.assign(mqs);
                for (MessageQueue mq : mqs) {
                    c.seek(mq, seekTo);
                }
                new Line("seeked").put("offset", seekTo).print();
            }
            long deadline = System.currentTimeMillis() + seconds * 1000L;
            while (System.currentTimeMillis() < deadline && (expect <= 0 || received < expect)) {
                List<MessageExt> got = c.poll(1000);
                for (MessageExt m : got) {
                    if (seen.put(m.getMsgId(), Boolean.TRUE) != null) {
                        dups++;
                    }
                    recvLine("recv", m).print();
                    received++;
                }
                if (!c.isAutoCommit() && !got.isEmpty()) {
                    c.commitSync();
                }
            }
            if (assign) {
                for (MessageQueue mq : mqs) {
                    try {
                        new Line("committed").put("mq", mq.toString()).put("offset", c.committed(mq))
                            .put("offsetForTimestamp0", c.offsetForTimestamp(mq, 0L)).print();
                    } catch (Exception e) {
                        error("committed/offsetForTimestamp " + mq, e);
                    }
                }
            } else {
                new Line("assignment").put("mqs", String.valueOf(c.assignment())).print();
            }
            Thread.sleep(intEnv("PROBE_LINGER_MS", 6000)); // auto commit interval 5 s
        } finally {
            c.shutdown();
        }
        new Line("done").put("received", received).put("distinct", seen.size()).put("duplicates", dups)
            .put("expected", expect).print();
        return expect <= 0 ? (received == 0 ? 0 : 1) : (received >= expect ? 0 : 1);
    }

    // ------------------------------------------------------------------ tx

    static int tx(String namesrv, String topic, String group, int seconds) throws Exception {
        final AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer producer = new TransactionMQProducer(group, HOOK);
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
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        while (System.currentTimeMillis() < deadline && checks.get() == 0) {
            Thread.sleep(500);
        }
        Thread.sleep(1000);
        producer.shutdown();
        new Line("done").put("failed", failures).put("checks", checks.get()).print();
        return failures == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ query / view

    static int query(String namesrv, String topic, String key) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("probe_query_group", HOOK);
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
            if (result.getMessageList().isEmpty()) {
                rc = 1;
            } else {
                MessageExt first = result.getMessageList().get(0);
                String offsetMsgId = offsetMsgId(first);
                try {
                    recvLine("viewed-by-offsetMsgId", producer.viewMessage(topic, offsetMsgId)).print();
                } catch (Exception e) {
                    rc = 1;
                    error("viewMessage(topic, offsetMsgId " + offsetMsgId + ")", e);
                }
                String uniq = first.getProperty("UNIQ_KEY");
                try {
                    recvLine("viewed-by-msgId", producer.viewMessage(topic, uniq)).print();
                } catch (Exception e) {
                    rc = 1;
                    error("viewMessage(topic, msgId " + uniq + ")", e);
                }
            }
        } finally {
            producer.shutdown();
        }
        return rc;
    }

    static int view(String namesrv, String topic, String msgId) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("probe_query_group", HOOK);
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

    static void usage() {
        System.err.println("usage: see the header of Client5Probe.java");
        System.exit(2);
    }

    public static void main(String[] args) {
        setDefault("rocketmq.client.localOffsetStoreDir", System.getProperty("java.io.tmpdir") + "/client5/local-offsets");
        if (args.length < 4) {
            usage();
        }
        int rc;
        try {
            switch (args[0]) {
                case "produce":
                    rc = produce(args[1], args[2], Integer.parseInt(args[3]), args.length > 4 ? args[4] : "probe5_producer_group");
                    break;
                case "consume":
                    rc = consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        args.length > 6 ? args[6] : null);
                    break;
                case "lite":
                    rc = lite(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        args.length > 6 ? args[6] : null, false, 0);
                    break;
                case "assign":
                    rc = lite(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        null, true, args.length > 6 ? Long.parseLong(args[6]) : 0L);
                    break;
                case "tx":
                    rc = tx(args[1], args[2], args[3], args.length > 4 ? Integer.parseInt(args[4]) : 90);
                    break;
                case "query":
                    rc = query(args[1], args[2], args[3]);
                    break;
                case "view":
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
        System.exit(rc);
    }

    static int intEnv(String name, int dflt) {
        String v = System.getenv(name);
        return v == null || v.trim().isEmpty() ? dflt : Integer.parseInt(v.trim());
    }

    static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }
}
