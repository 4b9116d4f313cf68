// rocketstore's broker benchmark load: the real Apache RocketMQ 4.9.8 Java client (built by
// tests/conformance/java/build.sh) sending to or consuming from one broker behind a name server.
// Our own code. Prints {"event":"start"} when the timed region begins and one result line
//   {"event":"done","messages":N,"seconds":S,"p50_us":X,"p99_us":Y,...}
// when it ends (the driver samples the broker's CPU time at both lines).
//
//   sync     NAMESRV TOPIC COUNT BODY_BYTES PRODUCERS     send(msg), PRODUCERS clients at once
//   async    NAMESRV TOPIC COUNT BODY_BYTES IN_FLIGHT     send(msg, callback), one client
//   batch    NAMESRV TOPIC COUNT BODY_BYTES PRODUCERS BATCH   send(list of BATCH)
//   fill     NAMESRV TOPIC COUNT BODY_BYTES               a backlog for consume (batches of 64, 4 clients)
//   consume  NAMESRV TOPIC COUNT GROUP                    push consumer from the first offset
//   mixed    NAMESRV TOPIC COUNT BODY_BYTES PRODUCERS GROUP   sync sends while a push consumer
//            of the same topic reads them; done when the consumer has every one
//
// Latencies are per send call (per batch for batch), or born-to-consumed for mixed's e2e_*.

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class BrokerBench {

    private BrokerBench() {
    }

    private static final AtomicInteger FAILURES = new AtomicInteger();

    private static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static long pct(long[] sortedNanos, int count, double p) {
        if (count == 0) {
            return -1;
        }
        int i = (int) Math.min(count - 1, Math.floor(p * count));
        return sortedNanos[i] / 1000;
    }

    private static void done(long messages, long nanos, long[] latNanos, int latCount, String extra) {
        long[] sorted = Arrays.copyOf(latNanos, latCount);
        Arrays.sort(sorted);
        out("{\"event\":\"done\",\"messages\":" + messages + ",\"seconds\":" + (nanos / 1e9)
            + ",\"p50_us\":" + pct(sorted, latCount, 0.50) + ",\"p99_us\":" + pct(sorted, latCount, 0.99)
            + ",\"failures\":" + FAILURES.get() + extra + "}");
    }

    private static DefaultMQProducer producer(String namesrv, String name) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("bench_producer");
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(name);  // its own client instance: its own connection
        p.setSendMsgTimeout(30000);
        p.setCompressMsgBodyOverHowmuch(1 << 20);
        p.start();
        return p;
    }

    private static Message message(String topic, byte[] body, int i) {
        Message m = new Message(topic, "bench", "k" + i, body);
        return m;
    }

    private static void check(SendResult r) {
        if (r == null || r.getSendStatus() != SendStatus.SEND_OK) {
            failed(r == null ? "no result" : String.valueOf(r.getSendStatus()));
        }
    }

    // Counts a failure; the first few say what it was on stderr.
    private static void failed(Object what) {
        if (FAILURES.incrementAndGet() <= 5) {
            System.err.println("failure: " + what);
        }
    }

    private static List<DefaultMQProducer> producers(String namesrv, String topic, int n, byte[] body)
            throws Exception {
        List<DefaultMQProducer> list = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            DefaultMQProducer p = producer(namesrv, "bench-" + i + "-" + System.nanoTime());
            for (int w = 0; w < 4; w++) {  // route lookup, connections, topic creation: untimed
                check(p.send(message(topic, body, -1)));
            }
            list.add(p);
        }
        return list;
    }

    // PRODUCERS threads, each its own client, COUNT/PRODUCERS calls each of `batch` messages.
    private static void sendSync(String namesrv, String topic, int count, int bodyBytes, int n, int batch,
                                 boolean quiet) throws Exception {
        byte[] body = new byte[bodyBytes];
        Arrays.fill(body, (byte) 'x');
        List<DefaultMQProducer> list = producers(namesrv, topic, n, body);
        int calls = Math.max(1, count / batch / n);
        long[] lat = new long[calls * n];
        AtomicInteger latCount = new AtomicInteger();
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            final DefaultMQProducer p = list.get(t);
            final int base = t * calls * batch;
            Thread th = new Thread(() -> {
                try {
                    go.await();
                    for (int c = 0; c < calls; c++) {
                        long t0 = System.nanoTime();
                        if (batch == 1) {
                            check(p.send(message(topic, body, base + c)));
                        } else {
                            List<Message> msgs = new ArrayList<>(batch);
                            for (int j = 0; j < batch; j++) {
                                msgs.add(message(topic, body, base + c * batch + j));
                            }
                            check(p.send(msgs));
                        }
                        lat[latCount.getAndIncrement()] = System.nanoTime() - t0;
                    }
                } catch (Exception e) {
                    FAILURES.incrementAndGet();
                    e.printStackTrace();
                }
            });
            th.start();
            threads.add(th);
        }
        if (!quiet) {
            out("{\"event\":\"start\"}");
        }
        long start = System.nanoTime();
        go.countDown();
        for (Thread th : threads) {
            th.join();
        }
        long nanos = System.nanoTime() - start;
        done((long) calls * batch * n, nanos, lat, latCount.get(), "");
        for (DefaultMQProducer p : list) {
            p.shutdown();
        }
    }

    private static void sendAsync(String namesrv, String topic, int count, int bodyBytes, int inFlight)
            throws Exception {
        byte[] body = new byte[bodyBytes];
        Arrays.fill(body, (byte) 'x');
        DefaultMQProducer p = producers(namesrv, topic, 1, body).get(0);
        Semaphore window = new Semaphore(inFlight);
        long[] lat = new long[count];
        AtomicInteger latCount = new AtomicInteger();
        CountDownLatch all = new CountDownLatch(count);
        out("{\"event\":\"start\"}");
        long start = System.nanoTime();
        for (int i = 0; i < count; i++) {
            window.acquire();
            final long t0 = System.nanoTime();
            p.send(message(topic, body, i), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    check(r);
                    lat[latCount.getAndIncrement()] = System.nanoTime() - t0;
                    window.release();
                    all.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    failed(e);
                    window.release();
                    all.countDown();
                }
            });
        }
        all.await(600, TimeUnit.SECONDS);
        long nanos = System.nanoTime() - start;
        done(count, nanos, lat, latCount.get(), "");
        p.shutdown();
    }

    private static DefaultMQPushConsumer consumer(String namesrv, String topic, String group,
                                                  MessageListenerConcurrently listener) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener(listener);
        return c;
    }

    private static void consume(String namesrv, String topic, int count, String group) throws Exception {
        AtomicInteger got = new AtomicInteger();
        AtomicLong first = new AtomicLong();
        CountDownLatch all = new CountDownLatch(1);
        DefaultMQPushConsumer c = consumer(namesrv, topic, group, (msgs, ctx) -> {
            first.compareAndSet(0, System.nanoTime());
            if (got.addAndGet(msgs.size()) >= count) {
                all.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        out("{\"event\":\"start\"}");
        long start = System.nanoTime();
        c.start();
        boolean whole = all.await(300, TimeUnit.SECONDS);
        long end = System.nanoTime();
        if (!whole) {
            FAILURES.incrementAndGet();
        }
        long[] none = new long[0];
        // From the consumer's start (rebalance and offset lookups included) to the last message.
        done(got.get(), end - start, none, 0, ",\"first_message_s\":" + ((first.get() - start) / 1e9));
        c.shutdown();
    }

    private static void mixed(String namesrv, String topic, int count, int bodyBytes, int n, String group)
            throws Exception {
        byte[] body = new byte[bodyBytes];
        Arrays.fill(body, (byte) 'x');
        AtomicInteger got = new AtomicInteger();
        CountDownLatch all = new CountDownLatch(1);
        long[] e2e = new long[count + 64];
        AtomicInteger e2eCount = new AtomicInteger();
        DefaultMQPushConsumer c = consumer(namesrv, topic, group, (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                if ("bench".equals(m.getTags()) && !"k-1".equals(m.getKeys())) {
                    int i = e2eCount.getAndIncrement();
                    if (i < e2e.length) {
                        e2e[i] = (now - m.getBornTimestamp()) * 1_000_000L;
                    }
                    if (got.incrementAndGet() >= count) {
                        all.countDown();
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        List<DefaultMQProducer> list = producers(namesrv, topic, n, body);
        c.start();
        Thread.sleep(3000);  // the consumer's rebalance, before the timed region
        int calls = Math.max(1, count / n);
        long[] lat = new long[calls * n];
        AtomicInteger latCount = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        out("{\"event\":\"start\"}");
        long start = System.nanoTime();
        for (int t = 0; t < n; t++) {
            final DefaultMQProducer p = list.get(t);
            final int base = t * calls;
            Thread th = new Thread(() -> {
                try {
                    for (int i = 0; i < calls; i++) {
                        long t0 = System.nanoTime();
                        check(p.send(message(topic, body, base + i)));
                        lat[latCount.getAndIncrement()] = System.nanoTime() - t0;
                    }
                } catch (Exception e) {
                    FAILURES.incrementAndGet();
                    e.printStackTrace();
                }
            });
            th.start();
            threads.add(th);
        }
        for (Thread th : threads) {
            th.join();
        }
        long produced = System.nanoTime() - start;
        boolean whole = all.await(600, TimeUnit.SECONDS);
        long nanos = System.nanoTime() - start;
        if (!whole) {
            FAILURES.incrementAndGet();
        }
        int ec = Math.min(e2eCount.get(), e2e.length);
        long[] sortedE2e = Arrays.copyOf(e2e, ec);
        Arrays.sort(sortedE2e);
        done((long) calls * n, nanos, lat, latCount.get(),
            ",\"produce_seconds\":" + (produced / 1e9) + ",\"consumed\":" + got.get()
            + ",\"e2e_p50_us\":" + pct(sortedE2e, ec, 0.50) + ",\"e2e_p99_us\":" + pct(sortedE2e, ec, 0.99));
        for (DefaultMQProducer p : list) {
            p.shutdown();
        }
        c.shutdown();
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String namesrv = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        switch (mode) {
            case "sync":
                sendSync(namesrv, topic, count, Integer.parseInt(args[4]), Integer.parseInt(args[5]), 1, false);
                break;
            case "async":
                sendAsync(namesrv, topic, count, Integer.parseInt(args[4]), Integer.parseInt(args[5]));
                break;
            case "batch":
                sendSync(namesrv, topic, count, Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                    Integer.parseInt(args[6]), false);
                break;
            case "fill":
                sendSync(namesrv, topic, count, Integer.parseInt(args[4]), 4, 64, true);
                break;
            case "consume":
                consume(namesrv, topic, count, args[4]);
                break;
            case "mixed":
                mixed(namesrv, topic, count, Integer.parseInt(args[4]), Integer.parseInt(args[5]), args[6]);
                break;
            default:
                System.err.println("unknown mode " + mode);
                System.exit(2);
        }
        System.exit(FAILURES.get() == 0 ? 0 : 1);
    }
}
