/*
 * rocketstore's golden-corpus harness for RocketMQ 5.x (our code, not RocketMQ's).
 *
 * The 5.x twin of GoldenHarness.java: it drives RocketMQ 5.x's own DefaultMessageStore
 * through its public API with the same fixed workload plus what 5.x stores differently, and
 * writes next to the store directory a JSON manifest (same format as 4.9.8's) of every input
 * and of what RocketMQ answered. Build and run it with tests/golden/harness/build5.sh.
 *
 * What differs from the 4.9.8 harness, because the 5.x store differs:
 *  - The delay-level rewrite left the store for the broker (HookUtils): here the harness does
 *    it the way the 5.x broker does before calling putMessage (REAL_TOPIC and REAL_QID into
 *    the decoded HashMap, properties string re-serialised, topic SCHEDULE_TOPIC_XXXX, queue
 *    level - 1). The record is the one 4.9.8's CommitLog wrote; the store still computes the
 *    delivery time as the ConsumeQueue tagsCode.
 *  - Topics longer than 127 characters: the CommitLog stores them as MESSAGE_VERSION_V2
 *    records (2-byte topic length). The 5.x broker does not choose the version: since 5.1
 *    the CommitLog itself resets it to V1 and picks V2 for such topics
 *    (autoMessageVersionOnTopicLen, on by default). The harness sets V2 on those messages
 *    too, which the CommitLog's choice then confirms.
 *  - A batch may carry batch-level properties (a 5.x broker puts CLUSTER there); the 5.x
 *    encoder appends them to every record of the batch. For such records the manifest's
 *    `properties` is the inner message's string followed by the batch's, i.e. what is stored.
 *  - Mode "propcrc": a small store written with enabledAppendPropCRC=true (every record ends
 *    with a __CRC32# property: ten decimal digits, least significant first).
 *  - Mode "dledger": the normal workload with a DLedger CommitLog (enableDLegerCommitLog, a
 *    one-member group); it needs RocketMQ's own DLedgerCommitLog and the real DLedger compiled
 *    in instead of the stand-ins (build5_store.sh). The DLedger classes are reached through
 *    reflection, so that the other modes still build against the stand-ins.
 *
 * Usage: GoldenHarness5 normal  <storeDir> <manifest.json>
 *        GoldenHarness5 crash   <storeDir> <manifest.json>  (prints READY, waits for kill -9)
 *        GoldenHarness5 recover <storeDir> <manifest.json>  (reopens a crashed store, no puts)
 *        GoldenHarness5 propcrc <storeDir> <manifest.json>  (enabledAppendPropCRC=true)
 *        GoldenHarness5 list    <storeDir> <listing.txt>    (every message of every queue)
 *        GoldenHarness5 dledger <storeDir> <manifest.json>  (normal's workload, DLedger CommitLog)
 */

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.Deflater;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.common.message.MessageVersion;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

public final class GoldenHarness5 {
    // The same small geometry as the 4.9.8 corpus.
    static final int COMMITLOG_FILE_SIZE = 64 * 1024;
    static final int CQ_UNITS = 300;
    static final int INDEX_SLOTS = 16;
    static final int INDEX_ENTRIES = 32;
    static final String STORE_HOST = "10.0.0.1:10911";
    static final long BORN_BASE = 1700000000000L;
    static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
    // Topic lengths around the v1 limit: 127 still fits the 1-byte length, 128 does not.
    static final String TOPIC_127 = longTopic("TopicLen127-", 127);
    static final String TOPIC_128 = longTopic("TopicLen128-", 128);
    static final String TOPIC_200 = longTopic("TopicLen200-", 200);
    static final String DLEDGER_GROUP = "golden";
    static final String DLEDGER_SELF_ID = "n0";

    private final DefaultMessageStore store;
    private final List<String> messages = new ArrayList<>();
    private final List<String> gets = new ArrayList<>();
    private final List<String> queries = new ArrayList<>();
    /** (commitLogOffset, size) of each entry of messages. */
    private final List<long[]> records = new ArrayList<>();
    /** Manifest sections of the dledger mode (empty otherwise). */
    private final StringBuilder extraSections = new StringBuilder();
    /** dLegerPeers of the dledger mode (null otherwise): its port is any free one. */
    private String dledgerPeers;
    private int seq;

    private GoldenHarness5(DefaultMessageStore store) {
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
        config.setEnabledAppendPropCRC(mode.equals("propcrc"));
        boolean dledger = mode.equals("dledger");
        if (dledger) {
            // A one-member DLedger group: DLedgerCommitLog keeps its entries under
            // <root>/dledger-n0/ (data files of mappedFileSizeCommitLog, 64 KiB here; index
            // files of DLedger's default 160 MiB), elects itself and commits each append
            // alone. The port is any free one: nothing connects to it.
            config.setEnableDLegerCommitLog(true);
            config.setdLegerGroup(DLEDGER_GROUP);
            config.setdLegerSelfId(DLEDGER_SELF_ID);
            config.setdLegerPeers(DLEDGER_SELF_ID + "-127.0.0.1:" + freePort());
        }
        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setBrokerClusterName("GoldenCluster");
        DefaultMessageStore store = new DefaultMessageStore(config,
            new BrokerStatsManager("GoldenCluster", true), null, brokerConfig,
            new ConcurrentHashMap<>());
        if (!store.load()) {
            throw new IllegalStateException("store.load() failed for " + root);
        }
        store.start();
        GoldenHarness5 h = new GoldenHarness5(store);
        if (dledger) {
            h.dledgerPeers = config.getdLegerPeers();
            h.waitLeader();
        }
        if (mode.equals("list")) {
            // Reads any store (e.g. one rocketstore wrote): every queue, every message.
            h.waitDispatched();
            h.listQueues(root, manifest);
            store.shutdown();
            System.out.println("DONE");
            return;
        }
        if (mode.equals("propcrc")) {
            h.propCrcWorkload();
        } else if (!mode.equals("recover")) {
            // "recover" only opens a store left by "crash": load() and start() run
            // RocketMQ's abnormal recovery; then the same reads and a normal shutdown.
            h.workload(mode.equals("crash"));
        }
        h.waitDispatched();
        h.readBack();
        if (dledger) {
            h.dledgerReadBack();
        }
        if (mode.equals("crash")) {
            // Let the flush services run at least once so the checkpoint is not empty, then
            // wait to be killed: the store is left exactly as a crashed broker leaves it.
            Thread.sleep(3000);
            h.writeManifest(manifest, mode, false, config);
            System.out.println("READY");
            System.out.flush();
            Thread.sleep(600_000);
            return;
        }
        store.shutdown();
        h.writeManifest(manifest, mode, true, config);
        System.out.println("DONE");
    }

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
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
                if (i % 20 == 7) { // v2 records must survive recovery too
                    put(TOPIC_200, i % 2, body(i, 60), keyed("crash-long-" + i, i), 0, 0, 0,
                        "127.0.0.1:40009", STORE_HOST, 0L);
                }
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
                    batch("TopicBatch", 0, 5, i, null);
                    break;
                case 47: // delayed messages: the broker's rewrite to SCHEDULE_TOPIC_XXXX
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
                case 120: // 5.x: topics past 127 characters are MESSAGE_VERSION_V2 records
                    longTopics(i);
                    break;
                default:
                    break;
            }
        }
        if (!crash) {
            batch("TopicBatch", 1, 3, 1000, null);
            // 5.x appends a batch's own properties to each of its records.
            Map<String, String> batchProps = new LinkedHashMap<>();
            batchProps.put("CLUSTER", "GoldenCluster");
            batch("TopicBatch", 1, 2, 2000, batchProps);
        }
    }

    private void longTopics(int i) throws Exception {
        put(TOPIC_127, 0, body(i, 70), keyed("len127", i), 0, 0, 0, "127.0.0.1:40010",
            STORE_HOST, 0L);
        put(TOPIC_128, 0, body(i, 70), keyed("len128", i + 1), 0, 0, 0, "127.0.0.1:40010",
            STORE_HOST, 0L);
        for (int k = 0; k < 4; k++) {
            Map<String, String> p = keyed("len200-" + k, i + 2 + k);
            p.put("TAGS", "long" + k);
            put(TOPIC_200, k % 2, body(i + k, 50 + 30 * k), p, 0, 0, 0, "127.0.0.1:40010",
                STORE_HOST, 0L);
        }
        // IPv6 hosts on a v2 record: the host fields move the topic length field.
        put(TOPIC_200, 1, body(i, 90), keyed("len200-v6", i + 6), 0,
            MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, 0,
            "[2001:db8::3]:50003", "[2001:db8::ff]:10911", 0L);
        batch(TOPIC_200, 0, 3, 3000, null);
    }

    /** The enabledAppendPropCRC store: a few of each kind, every record with a CRC property. */
    private void propCrcWorkload() throws Exception {
        for (int i = 0; i < 12; i++) {
            String topic = i % 3 == 2 ? "TopicB" : "TopicA";
            Map<String, String> props = new LinkedHashMap<>();
            props.put("TAGS", "Tag" + (i % 5));
            props.put("KEYS", "key-" + i + " shared-" + (i % 7));
            props.put("UNIQ_KEY", uniqKey(i));
            put(topic, i % 2, body(i, 40 + (i * 37) % 400), props, i % 5 == 0 ? 7 : 0, 0, 0,
                "127.0.0.1:" + (40000 + i), STORE_HOST, 0L);
        }
        // No properties at all: the record's properties are the CRC property alone.
        put("TopicA", 0, body(12, 30), new LinkedHashMap<>(), 0, 0, 0, "127.0.0.1:40001",
            STORE_HOST, 0L);
        put("TopicA", 1, new byte[0], new LinkedHashMap<>(), 0, 0, 0, "127.0.0.1:40001",
            STORE_HOST, 0L);
        put("TopicV6", 0, body(13, 100), keyed("v6-both", 13), 0,
            MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, 0,
            "[2001:db8::2]:50002", "[2001:db8::ff]:10911", 0L);
        put(TOPIC_200, 0, body(14, 80), keyed("len200", 14), 0, 0, 0, "127.0.0.1:40010",
            STORE_HOST, 0L);
        Map<String, String> d = keyed("delayed", 15);
        d.put("DELAY", "2");
        put("TopicDelay", 0, body(15, 64), d, 0, 0, 0, "127.0.0.1:40004", STORE_HOST, 0L);
        put("TopicA", 3, deflate(body(16, 2000)), keyed("zipped", 16), 0,
            MessageSysFlag.COMPRESSED_FLAG, 0, "127.0.0.1:40003", STORE_HOST, 0L);
        transactions(17);
        batch("TopicBatch", 0, 3, 20, null);
        Map<String, String> batchProps = new LinkedHashMap<>();
        batchProps.put("CLUSTER", "GoldenCluster");
        batch("TopicBatch", 1, 2, 30, batchProps);
        batch(TOPIC_200, 1, 2, 40, null);
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

    static String longTopic(String prefix, int length) {
        StringBuilder sb = new StringBuilder(prefix);
        while (sb.length() < length) {
            sb.append((char) ('a' + sb.length() % 26));
        }
        return sb.toString();
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
        if (topic.length() > Byte.MAX_VALUE) {
            // The CommitLog makes the same choice itself (autoMessageVersionOnTopicLen).
            msg.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        }
        rewriteDelayed(msg, sysFlag);
        PutMessageResult result = store.putMessage(msg);
        AppendMessageResult r = result.getAppendMessageResult();
        if (!result.isOk()) {
            throw new IllegalStateException("put failed: " + result);
        }
        long storeTimestamp = r.getStoreTimestamp();
        if (dledgerPeers != null) {
            // DLedgerCommitLog answers System.currentTimeMillis() after the append, not the
            // store timestamp it wrote into the record: keep both.
            storeTimestamp = store.lookMessageByOffset(r.getWroteOffset()).getStoreTimestamp();
        }
        String json = messageJson("single", 0, topic, queueId, body, propsText, flag, sysFlag,
            reconsumeTimes, born, bornHost, storeHost, preparedOffset,
            r.getWroteOffset(), r.getLogicsOffset(), r.getMsgId(), storeTimestamp,
            r.getWroteBytes(), result.getPutMessageStatus().name());
        if (dledgerPeers != null) {
            json = withField(json, "putResultStoreTimestamp", String.valueOf(r.getStoreTimestamp()));
        }
        messages.add(json);
        records.add(new long[] {r.getWroteOffset(), r.getWroteBytes()});
        // Index file names are creation times in ms: keep two rollovers apart.
        Thread.sleep(2);
        return r.getWroteOffset();
    }

    /**
     * The 5.x broker's delay-level rewrite (its HookUtils, run before the store sees the
     * message; 4.9.8's CommitLog did the same itself): for a non-transactional or commit
     * message with DELAY > 0, keep the real topic and queue in REAL_TOPIC and REAL_QID,
     * re-serialise the properties from the map, store under SCHEDULE_TOPIC_XXXX, queue
     * level - 1. Levels stay within the default 18.
     */
    private static void rewriteDelayed(MessageExtBrokerInner msg, int sysFlag) {
        int tranType = MessageSysFlag.getTransactionValue(sysFlag);
        boolean eligible = tranType == MessageSysFlag.TRANSACTION_NOT_TYPE
            || tranType == MessageSysFlag.TRANSACTION_COMMIT_TYPE;
        String level = msg.getProperties().get("DELAY");
        if (!eligible || level == null || Integer.parseInt(level) <= 0) {
            return;
        }
        msg.getProperties().put("REAL_TOPIC", msg.getTopic());
        msg.getProperties().put("REAL_QID", String.valueOf(msg.getQueueId()));
        msg.setPropertiesString(MessageDecoder.messageProperties2String(msg.getProperties()));
        msg.setTopic(SCHEDULE_TOPIC);
        msg.setQueueId(Integer.parseInt(level) - 1);
    }

    private void batch(String topic, int queueId, int count, int i, Map<String, String> batchProps)
        throws Exception {
        List<Message> list = new ArrayList<>();
        List<String> texts = new ArrayList<>();
        for (int k = 0; k < count; k++) {
            Message m = new Message(topic, body(i + k, 50 + 10 * k));
            Map<String, String> props = keyed("batch-" + i + "-" + k, i * 10 + k);
            MessageAccessor.setProperties(m, new LinkedHashMap<>(props));
            list.add(m);
            String text = propertiesString(props);
            if (dledgerPeers != null) {
                // DLedgerCommitLog's own encoder copies each message's properties from the
                // batch body as the client encoded them (MessageDecoder.encodeMessages: a
                // separator after every property, the last one too) and leaves the batch's
                // own properties out.
                text = text + '\u0002';
            } else if (batchProps != null) {
                // What the 5.x encoder stores: inner properties, then the batch's.
                text = text + '\u0002' + propertiesString(batchProps);
            }
            texts.add(text);
        }
        MessageExtBatch batch = new MessageExtBatch();
        batch.setTopic(topic);
        batch.setQueueId(queueId);
        batch.setBody(MessageDecoder.encodeMessages(list));
        if (batchProps != null) {
            MessageAccessor.setProperties(batch, new LinkedHashMap<>(batchProps));
            batch.setPropertiesString(MessageDecoder.messageProperties2String(batchProps));
        }
        long born = BORN_BASE + 1000L * seq++;
        batch.setBornTimestamp(born);
        batch.setBornHost(address("127.0.0.1:40100"));
        batch.setStoreHost(address(STORE_HOST));
        if (topic.length() > Byte.MAX_VALUE) {
            batch.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        }
        PutMessageResult result = store.putMessages(batch);
        if (!result.isOk()) {
            throw new IllegalStateException("batch put failed: " + result);
        }
        AppendMessageResult r = result.getAppendMessageResult();
        String[] ids = r.getMsgId().split(",");
        long offset = r.getWroteOffset();
        for (int k = 0; k < count; k++) {
            if (dledgerPeers != null) {
                // Under DLedger each message of the batch is an entry of its own (a 48-byte
                // entry header in between, maybe a file end): its offset is in its msgId.
                offset = MessageDecoder.decodeMessageId(ids[k]).getOffset();
            }
            MessageExt stored = store.lookMessageByOffset(offset);
            int size = stored.getStoreSize();
            long storeTimestamp = r.getStoreTimestamp();
            if (dledgerPeers != null) {
                storeTimestamp = stored.getStoreTimestamp();
                String found = storedProperties(offset, size);
                if (!found.equals(texts.get(k))) {
                    throw new IllegalStateException("batch record at " + offset + " holds properties "
                        + str(found) + ", not " + str(texts.get(k)));
                }
            }
            String json = messageJson("batch", k, topic, queueId, list.get(k).getBody(), texts.get(k),
                list.get(k).getFlag(), 0, 0, born, "127.0.0.1:40100", STORE_HOST, 0L, offset,
                r.getLogicsOffset() + k, ids[k], storeTimestamp, size,
                result.getPutMessageStatus().name());
            if (dledgerPeers != null) {
                if (batchProps != null) {
                    // Given to the store, not stored (see above).
                    json = withField(json, "batchProperties", str(propertiesString(batchProps)));
                }
                json = withField(json, "putResultStoreTimestamp",
                    String.valueOf(r.getStoreTimestamp()));
            }
            messages.add(json);
            records.add(new long[] {offset, size});
            offset += size;
        }
        Thread.sleep(2);
    }

    /** The properties string of the record at offset, as stored (byte for byte, UTF-8). */
    private String storedProperties(long offset, int size) {
        SelectMappedBufferResult sbr = store.getCommitLog().getMessage(offset, size);
        try {
            ByteBuffer b = sbr.getByteBuffer().slice();
            int magic = b.getInt(4);
            int sysFlag = b.getInt(4 + 4 + 4 + 4 + 4 + 8 + 8);
            int bornHost = (sysFlag & MessageSysFlag.BORNHOST_V6_FLAG) == 0 ? 8 : 20;
            int storeHost = (sysFlag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) == 0 ? 8 : 20;
            int pos = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + bornHost + 8 + storeHost + 4 + 8;
            pos += 4 + b.getInt(pos);
            boolean v2 = magic == MessageVersion.MESSAGE_VERSION_V2.getMagicCode();
            int topicLength = v2 ? b.getShort(pos) : b.get(pos);
            pos += (v2 ? 2 : 1) + topicLength;
            int propsLength = b.getShort(pos);
            byte[] props = new byte[propsLength];
            b.position(pos + 2);
            b.get(props);
            return new String(props, StandardCharsets.UTF_8);
        } finally {
            sbr.release();
        }
    }

    /** json (an object) with one more field at its end. */
    static String withField(String json, String name, String value) {
        return json.substring(0, json.length() - 1) + ",\"" + name + "\":" + value + "}";
    }

    // --- DLedger (mode dledger): HarnessSupport, through reflection ---------------------------

    private void waitLeader() throws Exception {
        HarnessSupport.waitLeader(store.getCommitLog());
    }

    /** The DLedger entries and state (HarnessSupport.dledgerSections); entry k must be the
     * record put k. */
    private void dledgerReadBack() throws Exception {
        extraSections.append(HarnessSupport.dledgerSections(store.getCommitLog(),
            store.getMessageStoreConfig().getStorePathRootDir(), records, 0, -1,
            store.getMinPhyOffset(), store.getMaxPhyOffset()));
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
            {"TopicBatch", "1"}, {"TopicTx", "0"}, {"TopicTx", "1"}, {SCHEDULE_TOPIC, "2"},
            {"NoSuchTopic", "0"}, {"TopicRoll", "0"}, {TOPIC_128, "0"}, {TOPIC_200, "0"},
            {TOPIC_200, "1"},
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
            {"TopicLarge", "large-1"}, {"TopicBatch", "batch-41-2"}, {"TopicBatch", "batch-2000-1"},
            {"TopicTx", "tx-1"}, {"TopicA", "no-such-key"}, {"TopicA", uniqKey(12)},
            {"TopicA", "\ud83d\ude00-70"}, {"TopicRoll", "roll-280"}, {TOPIC_127, "len127"},
            {TOPIC_128, "len128-alt"}, {TOPIC_200, "len200-2"}, {TOPIC_200, "batch-3000-1"},
            {TOPIC_200, "len200"}, {"TopicBatch", "batch-30-1"},
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
        return HarnessSupport.str(s);
    }

    /** "5.3.3" for MQVersion's "V5_3_3": the version of the store classes actually run. */
    static String rocketmqVersion() {
        String desc = MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION);
        return desc.substring(1).replace('_', '.');
    }

    private void writeManifest(String path, String mode, boolean cleanShutdown,
        MessageStoreConfig config) throws Exception {
        StringBuilder sb = new StringBuilder();
        sb.append("{\n\"rocketmqVersion\": ").append(str(rocketmqVersion()));
        sb.append(",\n\"mode\": ").append(str(mode));
        sb.append(",\n\"cleanShutdown\": ").append(cleanShutdown);
        sb.append(",\n\"config\": {\"mappedFileSizeCommitLog\": ").append(COMMITLOG_FILE_SIZE);
        sb.append(", \"mappedFileSizeConsumeQueue\": ").append(CQ_UNITS * 20);
        sb.append(", \"maxHashSlotNum\": ").append(INDEX_SLOTS);
        sb.append(", \"maxIndexNum\": ").append(INDEX_ENTRIES);
        sb.append(", \"storeHost\": ").append(str(STORE_HOST));
        sb.append(", \"enabledAppendPropCRC\": ").append(config.isEnabledAppendPropCRC());
        if (dledgerPeers != null) {
            sb.append(", \"enableDLegerCommitLog\": true, \"dLegerGroup\": ").append(str(DLEDGER_GROUP));
            sb.append(", \"dLegerSelfId\": ").append(str(DLEDGER_SELF_ID));
            sb.append(", \"dLegerPeers\": ").append(str(dledgerPeers));
        }
        sb.append("}");
        sb.append(",\n\"messages\": [\n").append(String.join(",\n", messages)).append("\n]");
        sb.append(",\n\"getMessage\": [\n").append(String.join(",\n", gets)).append("\n]");
        sb.append(",\n\"queryMessage\": [\n").append(String.join(",\n", queries)).append("\n]");
        sb.append(extraSections);
        sb.append("\n}\n");
        try (Writer w = new OutputStreamWriter(new FileOutputStream(path), StandardCharsets.UTF_8)) {
            w.write(sb.toString());
        }
    }
}
