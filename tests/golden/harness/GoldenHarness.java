/*
 * rocketstore's golden-corpus harness (our code, not RocketMQ's).
 *
 * It drives RocketMQ 4.9.8's own DefaultMessageStore through its public API with a fixed
 * workload and writes, next to the store directory, a JSON manifest of every input and of
 * what RocketMQ answered. tests/golden/test_rocketmq_written.py replays the manifest against
 * rocketstore. Build and run it with tests/golden/harness/build.sh (not run by CI).
 *
 * Usage: GoldenHarness normal <storeDir> <manifest.json>
 *        GoldenHarness crash  <storeDir> <manifest.json>   (prints READY, then waits for kill -9)
 *        GoldenHarness recover <storeDir> <manifest.json>  (reopens a crashed store, no puts)
 *        GoldenHarness list <storeDir> <listing.txt>       (every message of every queue)
 */

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.Deflater;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

public final class GoldenHarness {
    // Small geometry so that every kind of file rolls over within a few hundred messages.
    static final int COMMITLOG_FILE_SIZE = 64 * 1024;
    static final int CQ_UNITS = 300;
    static final int INDEX_SLOTS = 16;
    static final int INDEX_ENTRIES = 32;
    static final String STORE_HOST = "10.0.0.1:10911";
    static final long BORN_BASE = 1700000000000L;

    private final DefaultMessageStore store;
    private final List<String> messages = new ArrayList<>();
    private final List<String> gets = new ArrayList<>();
    private final List<String> queries = new ArrayList<>();
    private int seq;

    private GoldenHarness(DefaultMessageStore store) {
        this.store = store;
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        // The store leaves non-daemon threads behind; end the JVM explicitly.
        System.exit(0);
    }

    private static void run(String[] args) throws Exception {
        String mode = args[0];
        String root = args[1];
        String manifest = args[2];
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(root);
        config.setStorePathCommitLog(root + File.separator + "commitlog");
        config.setMappedFileSizeCommitLog(COMMITLOG_FILE_SIZE);
        config.setMappedFileSizeConsumeQueue(CQ_UNITS * 20);
        config.setMaxHashSlotNum(INDEX_SLOTS);
        config.setMaxIndexNum(INDEX_ENTRIES);
        config.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        DefaultMessageStore store = new DefaultMessageStore(
            config, new BrokerStatsManager("GoldenCluster", true), null, new BrokerConfig());
        if (!store.load()) {
            throw new IllegalStateException("store.load() failed for " + root);
        }
        store.start();
        GoldenHarness h = new GoldenHarness(store);
        if (mode.equals("list")) {
            // Reads any store (e.g. one rocketstore wrote): every queue, every message.
            h.waitDispatched();
            h.listQueues(root, manifest);
            store.shutdown();
            System.out.println("DONE");
            return;
        }
        if (!mode.equals("recover")) {
            // "recover" only opens a store left by "crash": load() and start() run
            // RocketMQ's abnormal recovery; then the same reads and a normal shutdown.
            h.workload(mode.equals("crash"));
        }
        h.waitDispatched();
        h.readBack();
        if (mode.equals("crash")) {
            // Let the flush services run at least once so the checkpoint is not empty, then
            // wait to be killed: the store is left exactly as a crashed broker leaves it.
            Thread.sleep(3000);
            h.writeManifest(manifest, mode, false);
            System.out.println("READY");
            System.out.flush();
            Thread.sleep(600_000);
            return;
        }
        store.shutdown();
        h.writeManifest(manifest, mode, true);
        System.out.println("DONE");
    }

    // --- the workload ----------------------------------------------------------------------

    private void workload(boolean crash) throws Exception {
        int rounds = crash ? 60 : 180;
        for (int i = 0; i < rounds; i++) {
            String topic = i % 3 == 2 ? "TopicB" : "TopicA";
            int queueId = topic.equals("TopicA") ? i % 4 : i % 2;
            Map<String, String> props = new LinkedHashMap<>();
            props.put("TAGS", "Tag" + (i % 5));
            props.put("KEYS", "key-" + i + " shared-" + (i % 7));
            props.put("UNIQ_KEY", uniqKey(i));
            if (i % 11 == 0) {
                props.put("WAIT", "true");
            }
            byte[] body = body(i, 40 + (i * 37) % 400);
            put(topic, queueId, body, props, i % 13 == 0 ? 7 : 0, 0, 0, "127.0.0.1:" + (40000 + i),
                STORE_HOST, 0L);
            if (crash) {
                continue;
            }
            switch (i) {
                case 5: // empty body, no properties at all
                    put("TopicA", 1, new byte[0], new LinkedHashMap<>(), 0, 0, 0, "127.0.0.1:40001",
                        STORE_HOST, 0L);
                    break;
                case 17: // large body: pushes the CommitLog towards its first rollover
                    put("TopicLarge", 0, body(i, 20_000), keyed("large-1", i), 0, 0, 0,
                        "127.0.0.1:40002", STORE_HOST, 0L);
                    break;
                case 23: // compressed body flag
                    put("TopicA", 2, deflate(body(i, 2000)), keyed("zipped", i), 0,
                        MessageSysFlag.COMPRESSED_FLAG, 0, "127.0.0.1:40003", STORE_HOST, 0L);
                    break;
                case 31: // IPv6 born host, then IPv6 store host too
                    put("TopicV6", 0, body(i, 100), keyed("v6-born", i), 0,
                        MessageSysFlag.BORNHOST_V6_FLAG, 0, "[2001:db8::1]:50001", STORE_HOST, 0L);
                    put("TopicV6", 1, body(i, 100), keyed("v6-both", i + 1), 0,
                        MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG,
                        0, "[2001:db8::2]:50002", "[2001:db8::ff]:10911", 0L);
                    break;
                case 41: // batch of five messages in one append
                    batch("TopicBatch", 0, 5, i);
                    break;
                case 47: // delayed messages: rewritten by the CommitLog to SCHEDULE_TOPIC_XXXX
                    Map<String, String> d1 = keyed("delayed-1", i);
                    d1.put("DELAY", "3");
                    put("TopicDelay", 0, body(i, 64), d1, 0, 0, 0, "127.0.0.1:40004", STORE_HOST, 0L);
                    Map<String, String> d2 = keyed("delayed-2", i + 1);
                    d2.put("DELAY", "18");
                    put("TopicDelay", 1, body(i + 1, 64), d2, 0, 0, 0, "127.0.0.1:40004",
                        STORE_HOST, 0L);
                    break;
                case 53: // transactions: half message, its commit, another half and its rollback
                    transactions(i);
                    break;
                case 61: // redelivered message
                    Map<String, String> r = keyed("retry", i);
                    r.put("RETRY_TOPIC", "TopicA");
                    put("%RETRY%GroupG", 0, body(i, 80), r, 0, 0, 3, "127.0.0.1:40005", STORE_HOST,
                        0L);
                    break;
                case 70: // non-ASCII TAGS and KEYS: UTF-8 lengths, UTF-16 String.hashCode
                    Map<String, String> u = new LinkedHashMap<>();
                    u.put("TAGS", "\u6807\u7b7e");
                    u.put("KEYS", "\u952e-70 \ud83d\ude00-70 cl\u00e9");
                    u.put("UNIQ_KEY", uniqKey(20_000 + i));
                    put("TopicA", 3, body(i, 120), u, 0, 0, 0, "127.0.0.1:40007", STORE_HOST, 0L);
                    break;
                case 100: // one queue past 300 units: its ConsumeQueue rolls to a second file
                    for (int k = 0; k < 320; k++) {
                        Map<String, String> q = new LinkedHashMap<>();
                        q.put("TAGS", "roll" + (k % 3));
                        if (k % 40 == 0) {
                            q.put("KEYS", "roll-" + k);
                        }
                        put("TopicRoll", 0, body(k, 16 + k % 32), q, 0, 0, 0, "127.0.0.1:40008",
                            STORE_HOST, 0L);
                    }
                    break;
                case 90: // a second large body later: another rollover
                    put("TopicLarge", 0, body(i, 30_000), keyed("large-2", i), 0, 0, 0,
                        "127.0.0.1:40002", STORE_HOST, 0L);
                    break;
                default:
                    break;
            }
        }
        if (!crash) {
            batch("TopicBatch", 1, 3, 1000);
        }
    }

    private void transactions(int i) throws Exception {
        Map<String, String> p1 = keyed("tx-1", i);
        p1.put("TRAN_MSG", "true");
        p1.put("PGROUP", "TxGroup");
        long half1 = put("TopicTx", 0, body(i, 90), p1, 0, MessageSysFlag.TRANSACTION_PREPARED_TYPE,
            0, "127.0.0.1:40006", STORE_HOST, 0L);
        Map<String, String> p2 = keyed("tx-2", i + 1);
        p2.put("TRAN_MSG", "true");
        p2.put("PGROUP", "TxGroup");
        long half2 = put("TopicTx", 1, body(i + 1, 90), p2, 0,
            MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0, "127.0.0.1:40006", STORE_HOST, 0L);
        // The end-transaction record as a broker writes it: same message, commit/rollback flag,
        // and the half message's CommitLog offset.
        put("TopicTx", 0, body(i, 90), keyed("tx-1", i), 0, MessageSysFlag.TRANSACTION_COMMIT_TYPE,
            0, "127.0.0.1:40006", STORE_HOST, half1);
        put("TopicTx", 1, body(i + 1, 90), keyed("tx-2", i + 1), 0,
            MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, 0, "127.0.0.1:40006", STORE_HOST, half2);
    }

    private static Map<String, String> keyed(String key, int i) {
        Map<String, String> props = new LinkedHashMap<>();
        props.put("TAGS", "TagX");
        props.put("KEYS", key + " " + key + "-alt");
        props.put("UNIQ_KEY", uniqKey(10_000 + i));
        return props;
    }

    /** A UNIQ_KEY shaped like the client's (32 hex digits), but deterministic. */
    static String uniqKey(int i) {
        return String.format("7F0000010001%08X%012X", 0x1234 + i, 0xABC000L + i);
    }

    static byte[] body(int i, int size) {
        byte[] out = new byte[size];
        byte[] text = ("message " + i + " of the golden corpus; ").getBytes(StandardCharsets.UTF_8);
        for (int k = 0; k < size; k++) {
            out[k] = text[k % text.length];
        }
        return out;
    }

    static byte[] deflate(byte[] data) {
        Deflater d = new Deflater(5);
        d.setInput(data);
        d.finish();
        byte[] buf = new byte[data.length + 64];
        int n = d.deflate(buf);
        d.end();
        byte[] out = new byte[n];
        System.arraycopy(buf, 0, out, 0, n);
        return out;
    }

    /** The broker's form of a properties map: name\1value\2..., no trailing separator. */
    static String propertiesString(Map<String, String> props) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, String> e : props.entrySet()) {
            if (sb.length() > 0) {
                sb.append('\u0002');
            }
            sb.append(e.getKey()).append('\u0001').append(e.getValue());
        }
        return sb.toString();
    }

    static InetSocketAddress address(String hostPort) throws Exception {
        int colon = hostPort.lastIndexOf(':');
        String host = hostPort.substring(0, colon).replace("[", "").replace("]", "");
        return new InetSocketAddress(InetAddress.getByName(host),
            Integer.parseInt(hostPort.substring(colon + 1)));
    }

    private long put(String topic, int queueId, byte[] body, Map<String, String> props, int flag,
        int sysFlag, int reconsumeTimes, String bornHost, String storeHost, long preparedOffset)
        throws Exception {
        MessageExtBrokerInner msg = new MessageExtBrokerInner();
        msg.setTopic(topic);
        msg.setQueueId(queueId);
        msg.setBody(body);
        msg.setFlag(flag);
        // As a broker does: the properties string travels as sent, the map is decoded from
        // it (a HashMap, whose order RocketMQ uses when it re-serialises, e.g. for DELAY).
        String propsText = propertiesString(props);
        msg.setPropertiesString(propsText);
        MessageAccessor.setProperties(msg, MessageDecoder.string2messageProperties(propsText));
        msg.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(props.get("TAGS")));
        msg.setSysFlag(sysFlag);
        long born = BORN_BASE + 1000L * seq++;
        msg.setBornTimestamp(born);
        msg.setBornHost(address(bornHost));
        msg.setStoreHost(address(storeHost));
        msg.setReconsumeTimes(reconsumeTimes);
        msg.setPreparedTransactionOffset(preparedOffset);
        PutMessageResult result = store.putMessage(msg);
        AppendMessageResult r = result.getAppendMessageResult();
        if (!result.isOk()) {
            throw new IllegalStateException("put failed: " + result);
        }
        messages.add(messageJson("single", 0, topic, queueId, body, propsText, flag, sysFlag,
            reconsumeTimes, born, bornHost, storeHost, preparedOffset, r.getWroteOffset(),
            r.getLogicsOffset(), r.getMsgId(), r.getStoreTimestamp(), r.getWroteBytes(),
            result.getPutMessageStatus().name()));
        // Index file names are creation times in ms: keep two rollovers apart.
        Thread.sleep(2);
        return r.getWroteOffset();
    }

    private void batch(String topic, int queueId, int count, int i) throws Exception {
        List<Message> list = new ArrayList<>();
        List<String> texts = new ArrayList<>();
        for (int k = 0; k < count; k++) {
            Message m = new Message(topic, body(i + k, 50 + 10 * k));
            Map<String, String> props = keyed("batch-" + i + "-" + k, i * 10 + k);
            MessageAccessor.setProperties(m, new LinkedHashMap<>(props));
            list.add(m);
            texts.add(propertiesString(props));
        }
        MessageExtBatch batch = new MessageExtBatch();
        batch.setTopic(topic);
        batch.setQueueId(queueId);
        batch.setBody(MessageDecoder.encodeMessages(list));
        long born = BORN_BASE + 1000L * seq++;
        batch.setBornTimestamp(born);
        batch.setBornHost(address("127.0.0.1:40100"));
        batch.setStoreHost(address(STORE_HOST));
        PutMessageResult result = store.putMessages(batch);
        if (!result.isOk()) {
            throw new IllegalStateException("batch put failed: " + result);
        }
        AppendMessageResult r = result.getAppendMessageResult();
        String[] ids = r.getMsgId().split(",");
        long offset = r.getWroteOffset();
        for (int k = 0; k < count; k++) {
            MessageExt stored = store.lookMessageByOffset(offset);
            int size = stored.getStoreSize();
            messages.add(messageJson("batch", k, topic, queueId, list.get(k).getBody(), texts.get(k),
                list.get(k).getFlag(), 0, 0, born, "127.0.0.1:40100", STORE_HOST, 0L, offset,
                r.getLogicsOffset() + k, ids[k], r.getStoreTimestamp(), size,
                result.getPutMessageStatus().name()));
            offset += size;
        }
        Thread.sleep(2);
    }

    // --- reads recorded for the tests -----------------------------------------------------

    private void waitDispatched() throws InterruptedException {
        for (int i = 0; i < 5000 && store.dispatchBehindBytes() > 0; i++) {
            Thread.sleep(2);
        }
        if (store.dispatchBehindBytes() > 0) {
            throw new IllegalStateException("dispatch did not catch up");
        }
    }

    private void readBack() {
        String[][] queues = {
            {"TopicA", "0"}, {"TopicA", "1"}, {"TopicB", "1"}, {"TopicBatch", "0"},
            {"TopicTx", "0"}, {"TopicTx", "1"}, {"SCHEDULE_TOPIC_XXXX", "2"}, {"NoSuchTopic", "0"},
            {"TopicRoll", "0"},
        };
        for (String[] q : queues) {
            for (long offset : new long[] {0, 3, 298, 300, 319, 320, 10_000}) {
                GetMessageResult g = store.getMessage("GoldenGroup", q[0], Integer.parseInt(q[1]),
                    offset, 4, null);
                List<Long> offsets = new ArrayList<>();
                if (g.getMessageBufferList() != null) {
                    for (ByteBuffer b : g.getMessageBufferList()) {
                        offsets.add(b.getLong(b.position() + 28));
                    }
                }
                gets.add("{\"topic\":" + str(q[0]) + ",\"queueId\":" + q[1] + ",\"queueOffset\":"
                    + offset + ",\"maxCount\":4,\"status\":" + str(g.getStatus().name())
                    + ",\"nextBeginOffset\":" + g.getNextBeginOffset() + ",\"minOffset\":"
                    + g.getMinOffset() + ",\"maxOffset\":" + g.getMaxOffset()
                    + ",\"commitLogOffsets\":" + offsets + "}");
                g.release();
            }
        }
        String[][] keys = {
            {"TopicA", "shared-3"}, {"TopicA", "key-7"}, {"TopicB", "shared-2"},
            {"TopicLarge", "large-1"}, {"TopicBatch", "batch-41-2"}, {"TopicTx", "tx-1"},
            {"TopicA", "no-such-key"}, {"TopicA", uniqKey(12)}, {"TopicA", "\ud83d\ude00-70"},
            {"TopicRoll", "roll-280"},
        };
        for (String[] k : keys) {
            QueryMessageResult r = store.queryMessage(k[0], k[1], 32, 0, Long.MAX_VALUE);
            List<Long> offsets = new ArrayList<>();
            for (ByteBuffer b : r.getMessageBufferList()) {
                offsets.add(b.getLong(b.position() + 28));
            }
            queries.add("{\"topic\":" + str(k[0]) + ",\"key\":" + str(k[1])
                + ",\"maxCount\":32,\"commitLogOffsets\":" + offsets + "}");
            r.release();
        }
    }

    /** One line per message reachable through the consume queues, in queue order:
     * topic, queueId, queueOffset, commitLogOffset, size, msgId, bodyCRC, storeTimestamp. */
    private void listQueues(String root, String out) throws Exception {
        List<String> lines = new ArrayList<>();
        File[] topics = new File(root, "consumequeue").listFiles();
        java.util.Arrays.sort(topics);
        for (File topicDir : topics) {
            File[] queueDirs = topicDir.listFiles();
            java.util.Arrays.sort(queueDirs);
            for (File queueDir : queueDirs) {
                String topic = topicDir.getName();
                int queueId = Integer.parseInt(queueDir.getName());
                long offset = store.getMinOffsetInQueue(topic, queueId);
                long max = store.getMaxOffsetInQueue(topic, queueId);
                lines.add("# " + topic + " " + queueId + " min " + offset + " max " + max);
                while (offset < max) {
                    GetMessageResult g = store.getMessage("GoldenGroup", topic, queueId, offset,
                        32, null);
                    if (g.getMessageBufferList() == null || g.getMessageBufferList().isEmpty()) {
                        lines.add("! " + g.getStatus() + " at " + offset);
                        g.release();
                        break;
                    }
                    for (ByteBuffer b : g.getMessageBufferList()) {
                        MessageExt m = MessageDecoder.decode(b.slice(), true, false);
                        lines.add(topic + " " + queueId + " " + m.getQueueOffset() + " "
                            + m.getCommitLogOffset() + " " + m.getStoreSize() + " "
                            + m.getMsgId() + " " + m.getBodyCRC() + " " + m.getStoreTimestamp());
                    }
                    offset = g.getNextBeginOffset();
                    g.release();
                }
            }
        }
        try (Writer w = new OutputStreamWriter(new FileOutputStream(out), StandardCharsets.UTF_8)) {
            w.write(String.join("\n", lines) + "\n");
        }
    }

    // --- manifest --------------------------------------------------------------------------

    private static String messageJson(String kind, int indexInBatch, String topic, int queueId,
        byte[] body, String props, int flag, int sysFlag, int reconsumeTimes, long born,
        String bornHost, String storeHost, long preparedOffset, long wroteOffset,
        long queueOffset, String msgId, long storeTimestamp, int wroteBytes, String status) {
        return "{\"kind\":" + str(kind) + ",\"indexInBatch\":" + indexInBatch + ",\"topic\":"
            + str(topic) + ",\"queueId\":" + queueId + ",\"body\":"
            + str(Base64.getEncoder().encodeToString(body)) + ",\"properties\":" + str(props)
            + ",\"flag\":" + flag + ",\"sysFlag\":" + sysFlag + ",\"reconsumeTimes\":"
            + reconsumeTimes + ",\"bornTimestamp\":" + born + ",\"bornHost\":" + str(bornHost)
            + ",\"storeHost\":" + str(storeHost) + ",\"preparedTransactionOffset\":"
            + preparedOffset + ",\"putStatus\":" + str(status) + ",\"commitLogOffset\":"
            + wroteOffset + ",\"queueOffset\":" + queueOffset + ",\"msgId\":" + str(msgId)
            + ",\"storeTimestamp\":" + storeTimestamp + ",\"wroteBytes\":" + wroteBytes + "}";
    }

    static String str(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
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

    private void writeManifest(String path, String mode, boolean cleanShutdown) throws Exception {
        StringBuilder sb = new StringBuilder();
        sb.append("{\n\"rocketmqVersion\": \"4.9.8\",\n\"mode\": ").append(str(mode));
        sb.append(",\n\"cleanShutdown\": ").append(cleanShutdown);
        sb.append(",\n\"config\": {\"mappedFileSizeCommitLog\": ").append(COMMITLOG_FILE_SIZE);
        sb.append(", \"mappedFileSizeConsumeQueue\": ").append(CQ_UNITS * 20);
        sb.append(", \"maxHashSlotNum\": ").append(INDEX_SLOTS);
        sb.append(", \"maxIndexNum\": ").append(INDEX_ENTRIES);
        sb.append(", \"storeHost\": ").append(str(STORE_HOST)).append("}");
        sb.append(",\n\"messages\": [\n").append(String.join(",\n", messages)).append("\n]");
        sb.append(",\n\"getMessage\": [\n").append(String.join(",\n", gets)).append("\n]");
        sb.append(",\n\"queryMessage\": [\n").append(String.join(",\n", queries)).append("\n]");
        sb.append("\n}\n");
        try (Writer w = new OutputStreamWriter(new FileOutputStream(path), StandardCharsets.UTF_8)) {
            w.write(sb.toString());
        }
    }
}
