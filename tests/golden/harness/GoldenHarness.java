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
 *        GoldenHarness lmq <storeDir> <manifest.json>      (enableLmq + enableMultiDispatch:
 *                                                          INNER_MULTI_DISPATCH workload)
 *        GoldenHarness cqext|multipath <storeDir> <manifest.json>  (the basic workload with
 *                                                          ConsumeQueueExt / two CommitLog paths)
 *        GoldenHarness dledger <storeDir> <manifest.json>  (the basic workload with a DLedger
 *                                                          CommitLog; needs DLedger compiled in)
 *        GoldenHarness dledgermixed <storeDir> <manifest.json>  (part of it with a plain
 *                                                          CommitLog, the rest after switching
 *                                                          the same store to DLedger)
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
import java.util.zip.Deflater;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
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
    static final String DLEDGER_GROUP = "golden";
    static final String DLEDGER_SELF_ID = "n0";
    /** dledgermixed: rounds of the workload written before DLedger is switched on. */
    static final int MIXED_SPLIT = 60;

    /** The store written to (dledgermixed: the plain one, then the DLedger one). */
    private DefaultMessageStore store;
    /** dLegerPeers of a DLedger mode (null otherwise): its port is any free one. */
    private String dledgerPeers;
    /** dledgermixed: the plain CommitLog's max offset at its shutdown (-1 otherwise). */
    private long plainMaxPhyOffset = -1;
    private final List<String> messages = new ArrayList<>();
    private final List<String> gets = new ArrayList<>();
    private final List<String> queries = new ArrayList<>();
    /** (commitLogOffset, size) of each entry of messages. */
    private final List<long[]> records = new ArrayList<>();
    /** Manifest sections only the lmq mode writes (empty otherwise). */
    private final StringBuilder extraSections = new StringBuilder();
    private boolean lmqConfig;
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
        if (mode.equals("dledgermixed")) {
            runMixed(root, manifest);
            return;
        }
        boolean dledger = mode.equals("dledger");
        DefaultMessageStore store = open(mode, root, dledger);
        GoldenHarness h = new GoldenHarness(store);
        if (dledger) {
            h.dledgerPeers = store.getMessageStoreConfig().getdLegerPeers();
            h.waitLeader();
        }
        if (mode.equals("lmq")) {
            h.lmqWorkload();
            h.waitDispatched();
            h.lmqReadBack(root);
            store.shutdown();
            h.writeManifest(manifest, mode, true);
            System.out.println("DONE");
            return;
        }
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
            boolean crash = mode.equals("crash");
            h.workload(0, crash ? 60 : 180, !crash, !crash);
        }
        h.waitDispatched();
        h.readBack();
        if (dledger) {
            h.dledgerReadBack(0);
        }
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

    /** The store of a mode at root, loaded and started (dledger: a DLedger CommitLog). */
    private static DefaultMessageStore open(String mode, String root, boolean dledger)
        throws Exception {
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(root);
        config.setStorePathCommitLog(root + File.separator + "commitlog");
        config.setMappedFileSizeCommitLog(COMMITLOG_FILE_SIZE);
        config.setMappedFileSizeConsumeQueue(CQ_UNITS * 20);
        config.setMaxHashSlotNum(INDEX_SLOTS);
        config.setMaxIndexNum(INDEX_ENTRIES);
        config.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        if (mode.equals("lmq")) {
            config.setEnableLmq(true);
            config.setEnableMultiDispatch(true);
        }
        if (mode.equals("cqext")) {
            // Every consume-queue unit gets a ConsumeQueueExt unit; its tagsCode field
            // holds the extension's address.
            config.setEnableConsumeQueueExt(true);
            // Small extension files (48 MiB by default), so that some roll over: a file
            // whose next unit does not fit ends with the short -1.
            config.setMappedFileSizeConsumeQueueExt(1024);
        }
        if (mode.equals("multipath")) {
            // MultiPathMappedFileQueue: the basic workload's CommitLog over two paths, given
            // out of order (RocketMQ sorts them), so file i lands in path i % 2.
            String base = root + File.separator + "commitlog" + File.separator;
            config.setStorePathCommitLog(base + "b," + base + "a");
        }
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
        DefaultMessageStore store = new DefaultMessageStore(
            config, new BrokerStatsManager("GoldenCluster", true), null, new BrokerConfig());
        if (mode.equals("cqext")) {
            // What a broker's CommitLogDispatcherCalcBitMap does: a filter bitmap (64 bits,
            // bitMapLengthConsumeQueueExt) for some messages, here TopicA's.
            store.getDispatcherList().addFirst(request -> {
                if (request.getTopic().equals("TopicA")) {
                    request.setBitMap(
                        ByteBuffer.allocate(8).putLong(request.getCommitLogOffset() * 31).array());
                }
            });
        }
        if (!store.load()) {
            throw new IllegalStateException("store.load() failed for " + root);
        }
        store.start();
        return store;
    }

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }

    /** dledgermixed: the basic workload up to round MIXED_SPLIT with a plain CommitLog, a
     * normal shutdown, then the same directory reopened with enableDLegerCommitLog=true
     * (RocketMQ's "mixed" recovery ends the old CommitLog and starts DLedger after its last
     * file) and the rest of the workload. */
    private static void runMixed(String root, String manifest) throws Exception {
        DefaultMessageStore plain = open("dledgermixed", root, false);
        GoldenHarness h = new GoldenHarness(plain);
        h.workload(0, MIXED_SPLIT, true, false);
        h.waitDispatched();
        h.plainMaxPhyOffset = plain.getMaxPhyOffset();
        plain.shutdown();
        // config/delayOffset.json was written at shutdown by the fastjson stand-in, which
        // cannot parse it back (the build drops config/ anyway): remove it so that the store
        // loads. Nothing reads it under DLedger (the schedule service is not started).
        File configDir = new File(root, "config");
        File[] configFiles = configDir.listFiles();
        if (configFiles != null) {
            for (File f : configFiles) {
                if (!f.delete()) {
                    throw new IllegalStateException("cannot remove " + f);
                }
            }
        }
        int firstDLedger = h.messages.size();
        DefaultMessageStore store = open("dledgermixed", root, true);
        h.store = store;
        h.dledgerPeers = store.getMessageStoreConfig().getdLegerPeers();
        h.waitLeader();
        h.workload(MIXED_SPLIT, 180, true, true);
        h.waitDispatched();
        h.readBack();
        h.dledgerReadBack(firstDLedger);
        store.shutdown();
        h.writeManifest(manifest, "dledgermixed", true);
        System.out.println("DONE");
    }

    // --- the workload ----------------------------------------------------------------------

    /** Rounds from..to-1 of the workload; extras: the special cases after some rounds (not in
     * crash); finalBatch: the batch that ends the full workload. */
    private void workload(int from, int to, boolean extras, boolean finalBatch) throws Exception {
        for (int i = from; i < to; i++) {
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
            if (!extras) {
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
        if (finalBatch) {
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
        return putText(topic, queueId, body, propertiesString(props), props.get("TAGS"), flag,
            sysFlag, reconsumeTimes, bornHost, storeHost, preparedOffset);
    }

    private long putText(String topic, int queueId, byte[] body, String propsText, String tags,
        int flag, int sysFlag, int reconsumeTimes, String bornHost, String storeHost,
        long preparedOffset) throws Exception {
        MessageExtBrokerInner msg = new MessageExtBrokerInner();
        msg.setTopic(topic);
        msg.setQueueId(queueId);
        msg.setBody(body);
        msg.setFlag(flag);
        // As a broker does: the properties string travels as sent, the map is decoded from
        // it (a HashMap, whose order RocketMQ uses when it re-serialises, e.g. for DELAY).
        msg.setPropertiesString(propsText);
        MessageAccessor.setProperties(msg, MessageDecoder.string2messageProperties(propsText));
        msg.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(tags));
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
        long storeTimestamp = r.getStoreTimestamp();
        if (dledgerPeers != null) {
            // DLedgerCommitLog answers System.currentTimeMillis() after the append, not the
            // store timestamp it wrote into the record: keep both.
            storeTimestamp = store.lookMessageByOffset(r.getWroteOffset()).getStoreTimestamp();
        }
        String json = messageJson("single", 0, topic, queueId, body, propsText, flag, sysFlag,
            reconsumeTimes, born, bornHost, storeHost, preparedOffset, r.getWroteOffset(),
            r.getLogicsOffset(), r.getMsgId(), storeTimestamp, r.getWroteBytes(),
            result.getPutMessageStatus().name());
        if (dledgerPeers != null) {
            json = withField(json, "putResultStoreTimestamp", String.valueOf(r.getStoreTimestamp()));
        }
        messages.add(json);
        records.add(new long[] {r.getWroteOffset(), r.getWroteBytes()});
        // Index file names are creation times in ms: keep two rollovers apart.
        Thread.sleep(2);
        return r.getWroteOffset();
    }

    private void batch(String topic, int queueId, int count, int i) throws Exception {
        batch(topic, queueId, count, i, null);
    }

    /** batchProps: properties of the MessageExtBatch itself (null: none, as a 4.9.8 broker). */
    private void batch(String topic, int queueId, int count, int i, String batchProps)
        throws Exception {
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
        if (batchProps != null) {
            // The encoder serialises this map (a HashMap) after each message's own properties.
            MessageAccessor.setProperties(batch, MessageDecoder.string2messageProperties(batchProps));
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
            long storeTimestamp = dledgerPeers != null ? stored.getStoreTimestamp()
                : r.getStoreTimestamp();
            String json = messageJson("batch", k, topic, queueId, list.get(k).getBody(), texts.get(k),
                list.get(k).getFlag(), 0, 0, born, "127.0.0.1:40100", STORE_HOST, 0L, offset,
                r.getLogicsOffset() + k, ids[k], storeTimestamp, size,
                result.getPutMessageStatus().name());
            if (batchProps != null) {
                json = withField(json, "batchProperties", str(batchProps));
            }
            if (dledgerPeers != null) {
                json = withField(json, "putResultStoreTimestamp",
                    String.valueOf(r.getStoreTimestamp()));
            }
            messages.add(json);
            records.add(new long[] {offset, size});
            offset += size;
        }
        Thread.sleep(2);
    }

    // --- the lmq workload (mode "lmq": enableLmq and enableMultiDispatch) ------------------

    /** Insertion orders of the properties given to the store (and of the string sent):
     * UNIQ_KEY and INNER_MULTI_DISPATCH share a bucket of a 16-slot HashMap, as do WAIT,
     * DELAY and PGROUP, so the order RocketMQ re-serialises them in depends on it. */
    private static final String[][] LMQ_ORDERS = {
        {"TAGS", "KEYS", "UNIQ_KEY", "WAIT", "INNER_MULTI_DISPATCH"},
        {"INNER_MULTI_DISPATCH", "WAIT", "UNIQ_KEY", "KEYS", "TAGS"},
        {"UNIQ_KEY", "INNER_MULTI_DISPATCH", "TAGS", "WAIT", "KEYS"},
        {"WAIT", "TAGS", "INNER_MULTI_DISPATCH", "KEYS", "UNIQ_KEY"},
    };

    /** dispatch null: no INNER_MULTI_DISPATCH at all; "" or " ": the property, blank. */
    private static Map<String, String> lmqProps(int order, int i, String dispatch, boolean wait) {
        Map<String, String> values = new LinkedHashMap<>();
        values.put("TAGS", "TagL" + (i % 5));
        values.put("KEYS", "lmq-" + i + " lshared-" + (i % 7));
        values.put("UNIQ_KEY", uniqKey(30_000 + i));
        if (wait) {
            values.put("WAIT", "true");
        }
        if (dispatch != null) {
            values.put("INNER_MULTI_DISPATCH", dispatch);
        }
        Map<String, String> props = new LinkedHashMap<>();
        for (String name : LMQ_ORDERS[order % LMQ_ORDERS.length]) {
            if (values.containsKey(name)) {
                props.put(name, values.get(name));
            }
        }
        return props;
    }

    private long lmqPut(int queueId, int i, Map<String, String> props) throws Exception {
        return put("TopicL", queueId, body(i, 40 + (i * 53) % 500), props, 0, 0, 0,
            "127.0.0.1:" + (41_000 + i % 1000), STORE_HOST, 0L);
    }

    private void lmqWorkload() throws Exception {
        lmqConfig = true;
        long preparedOffset = 0;
        int preparedSize = 0;
        for (int i = 0; i < 150; i++) {
            int q = i % 4;
            // The common case: two LMQs, WAIT=true, the four insertion orders in turn.
            lmqPut(q, i, lmqProps(i, i, "%LMQ%a,%LMQ%b", true));
            if (i % 10 == 3) { // a plain TopicL message in between: no INNER_MULTI_DISPATCH
                lmqPut(q, 1000 + i, lmqProps(i + 1, 1000 + i, null, true));
            }
            if (i % 15 == 7) { // one LMQ only
                lmqPut(q, 2000 + i, lmqProps(i + 1, 2000 + i, "%LMQ%a", true));
            }
            if (i % 15 == 11) { // three LMQs, the new one first
                lmqPut(q, 3000 + i, lmqProps(i + 2, 3000 + i, "%LMQ%c,%LMQ%a,%LMQ%b", true));
            }
            if (i % 20 == 13) { // a non-LMQ name: the message's own queue id (1)
                lmqPut(q, 4000 + i, lmqProps(i + 3, 4000 + i, "PlainQ,%LMQ%a", true));
            }
            if (i % 20 == 6) { // a non-LMQ name second (queue 2)
                lmqPut(q, 5000 + i, lmqProps(i, 5000 + i, "%LMQ%b,PlainQ", true));
            }
            switch (i) {
                case 40: // the property present but blank: StringUtils.isBlank, not dispatched
                    lmqPut(q, 6000, lmqProps(0, 6000, "", true));
                    lmqPut(q, 6001, lmqProps(1, 6001, " ", true));
                    break;
                case 50: // no WAIT to remove
                    lmqPut(q, 6002, lmqProps(2, 6002, "%LMQ%a,%LMQ%b", false));
                    lmqPut(q, 6003, lmqProps(1, 6003, "%LMQ%a,%LMQ%b", false));
                    break;
                case 60: { // 11 and 12 properties given: INNER_MULTI_QUEUE_OFFSET is the 12th
                    // (16 slots) or the 13th (the HashMap resizes to 32 slots before the re-
                    // serialisation); u1 and u19 share the slot of UNIQ_KEY and INNER_MULTI_DISPATCH.
                    for (int extra = 0; extra < 2; extra++) {
                        Map<String, String> p = new LinkedHashMap<>();
                        p.put("u19", "v19");
                        p.putAll(lmqProps(3, 6004 + extra, "%LMQ%a,%LMQ%b", true));
                        p.put("u1", "v1");
                        p.put("u2", "v2");
                        p.put("u18", "v18");
                        p.put("u3", "v3");
                        p.put("u4", "v4");
                        if (extra == 1) {
                            p.put("u5", "v5");
                        }
                        lmqPut(q, 6004 + extra, p);
                    }
                    break;
                }
                case 70: { // a half message: wrapped, but the LMQ offsets do not advance
                    Map<String, String> p = lmqProps(0, 6010, "%LMQ%a,%LMQ%b", true);
                    p.put("TRAN_MSG", "true");
                    p.put("PGROUP", "TxGroupL");
                    preparedOffset = put("TopicL", 0, body(6010, 90), p, 0,
                        MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0, "127.0.0.1:42006", STORE_HOST, 0L);
                    preparedSize = (int) records.get(records.size() - 1)[1];
                    break;
                }
                case 72: { // its commit, as a broker writes it: the half's stored properties
                    String half = storedRecord(preparedOffset, preparedSize)[3];
                    putText("TopicL", 0, body(6010, 90), half,
                        MessageDecoder.string2messageProperties(half).get("TAGS"), 0,
                        MessageSysFlag.TRANSACTION_COMMIT_TYPE, 0, "127.0.0.1:42006", STORE_HOST,
                        preparedOffset);
                    break;
                }
                case 80: // a batch whose own properties carry INNER_MULTI_DISPATCH
                    batch("TopicL", 2, 3, 7000,
                        "INNER_MULTI_DISPATCH\u0001%LMQ%a,%LMQ%b\u0002WAIT\u0001true");
                    break;
                case 90: // a direct put to PlainQ queue 2: the same offset counter as the dispatch
                    put("PlainQ", 2, body(6020, 70), lmqProps(0, 6020, null, true), 0, 0, 0,
                        "127.0.0.1:42007", STORE_HOST, 0L);
                    break;
                case 146: { // delayed: rewritten to SCHEDULE_TOPIC_XXXX queue 1, then wrapped
                    Map<String, String> p = lmqProps(1, 6030, "%LMQ%a,PlainQ", true);
                    p.put("DELAY", "2");
                    lmqPut(3, 6030, p);
                    break;
                }
                default:
                    break;
            }
        }
    }

    /** A record as stored, read through the store: topic, queueId, queueOffset, properties. */
    private String[] storedRecord(long offset, long size) {
        SelectMappedBufferResult sbr = store.selectOneMessageByOffset(offset, (int) size);
        try {
            ByteBuffer b = sbr.getByteBuffer();
            int pos = b.position();
            int queueId = b.getInt(pos + 12);
            long queueOffset = b.getLong(pos + 20);
            int sysFlag = b.getInt(pos + 36);
            int bornLen = (sysFlag & MessageSysFlag.BORNHOST_V6_FLAG) == 0 ? 8 : 20;
            int storeLen = (sysFlag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) == 0 ? 8 : 20;
            int p = pos + 40 + 8 + bornLen + 8 + storeLen + 4 + 8;
            p += 4 + b.getInt(p);
            int topicLen = b.get(p) & 0xff;
            byte[] topic = new byte[topicLen];
            for (int k = 0; k < topicLen; k++) {
                topic[k] = b.get(p + 1 + k);
            }
            p += 1 + topicLen;
            int propsLen = b.getShort(p) & 0xffff;
            byte[] props = new byte[propsLen];
            for (int k = 0; k < propsLen; k++) {
                props[k] = b.get(p + 2 + k);
            }
            return new String[] {new String(topic, StandardCharsets.UTF_8), String.valueOf(queueId),
                String.valueOf(queueOffset), new String(props, StandardCharsets.UTF_8)};
        } finally {
            sbr.release();
        }
    }

    private static String withField(String json, String name, String value) {
        return json.substring(0, json.length() - 1) + ",\"" + name + "\":" + value + "}";
    }

    private void lmqReadBack(String root) throws Exception {
        // Every record is the harness's: nothing else (e.g. a delivered delayed message) was
        // appended.
        long[] last = records.get(records.size() - 1);
        if (store.getMaxPhyOffset() != last[0] + last[1]) {
            throw new IllegalStateException("CommitLog ends at " + store.getMaxPhyOffset()
                + ", the last record put at " + (last[0] + last[1]));
        }
        for (int k = 0; k < messages.size(); k++) {
            String[] r = storedRecord(records.get(k)[0], records.get(k)[1]);
            messages.set(k, withField(withField(withField(withField(messages.get(k),
                "storedTopic", str(r[0])), "storedQueueId", r[1]), "storedQueueOffset", r[2]),
                "storedProperties", str(r[3])));
        }
        // Every consume queue directory, its units in order, read through ConsumeQueue.
        List<String> cqs = new ArrayList<>();
        for (Object[] q : queueDirs(root)) {
            String topic = (String) q[0];
            int queueId = (Integer) q[1];
            ConsumeQueue cq = store.getConsumeQueue(topic, queueId);
            long min = cq.getMinOffsetInQueue();
            long max = cq.getMaxOffsetInQueue();
            List<String> units = new ArrayList<>();
            long index = min;
            while (index < max) {
                SelectMappedBufferResult sbr = cq.getIndexBuffer(index);
                if (sbr == null) {
                    throw new IllegalStateException("no unit " + index + " in " + topic + "/" + queueId);
                }
                try {
                    ByteBuffer b = sbr.getByteBuffer();
                    while (b.remaining() >= 20 && index < max) {
                        long off = b.getLong();
                        int size = b.getInt();
                        long tags = b.getLong();
                        units.add("[" + off + "," + size + "," + tags + "]");
                        index++;
                    }
                } finally {
                    sbr.release();
                }
            }
            cqs.add("{\"topic\":" + str(topic) + ",\"queueId\":" + queueId + ",\"minOffset\":"
                + min + ",\"maxOffset\":" + max + ",\"units\":[" + String.join(",", units) + "]}");
        }
        extraSections.append(",\n\"consumeQueues\": [\n").append(String.join(",\n", cqs)).append("\n]");
        // The CommitLog's next-offset tables as the puts left them.
        extraSections.append(",\n\"topicQueueTable\": ")
            .append(tableJson(store.getCommitLog().getTopicQueueTable()));
        extraSections.append(",\n\"lmqTopicQueueTable\": ")
            .append(tableJson(store.getCommitLog().getLmqTopicQueueTable()));
        String[][] queues = {
            {"%LMQ%a", "0"}, {"%LMQ%b", "0"}, {"%LMQ%c", "0"}, {"%LMQ%a", "1"}, {"PlainQ", "1"},
            {"PlainQ", "2"}, {"PlainQ", "3"}, {"TopicL", "0"}, {"TopicL", "2"},
            {"SCHEDULE_TOPIC_XXXX", "1"},
        };
        for (String[] q : queues) {
            for (long offset : new long[] {0, 3, 31, 32, 150, 10_000}) {
                gets.add(getJson(q[0], Integer.parseInt(q[1]), offset, 4));
            }
        }
        // %LMQ%a queue 0 from offset 0 to its end, 32 at a time.
        long offset = 0;
        for (int n = 0; n < 100; n++) {
            String json = getJson("%LMQ%a", 0, offset, 32);
            gets.add(json);
            GetMessageResult g = store.getMessage("GoldenGroup", "%LMQ%a", 0, offset, 32, null);
            long next = g.getNextBeginOffset();
            long max = g.getMaxOffset();
            g.release();
            if (next >= max || next == offset) {
                break;
            }
            offset = next;
        }
        String[][] keys = {
            {"TopicL", "lshared-3"}, {"TopicL", "lmq-7"}, {"TopicL", uniqKey(30_005)},
            {"TopicL", "lmq-6010"}, {"TopicL", "batch-7000-1"}, {"%LMQ%a", "lmq-7"},
            {"PlainQ", "lmq-6020"}, {"SCHEDULE_TOPIC_XXXX", "lmq-6030"}, {"TopicL", "lmq-6030"},
        };
        recordQueries(keys);
    }

    private String getJson(String topic, int queueId, long offset, int maxCount) {
        GetMessageResult g = store.getMessage("GoldenGroup", topic, queueId, offset, maxCount, null);
        List<Long> offsets = new ArrayList<>();
        if (g.getMessageBufferList() != null) {
            for (ByteBuffer b : g.getMessageBufferList()) {
                offsets.add(b.getLong(b.position() + 28));
            }
        }
        String json = "{\"topic\":" + str(topic) + ",\"queueId\":" + queueId + ",\"queueOffset\":"
            + offset + ",\"maxCount\":" + maxCount + ",\"status\":" + str(g.getStatus().name())
            + ",\"nextBeginOffset\":" + g.getNextBeginOffset() + ",\"minOffset\":"
            + g.getMinOffset() + ",\"maxOffset\":" + g.getMaxOffset()
            + ",\"commitLogOffsets\":" + offsets + "}";
        g.release();
        return json;
    }

    private static String tableJson(Map<String, Long> table) {
        List<String> entries = new ArrayList<>();
        for (Map.Entry<String, Long> e : new java.util.TreeMap<>(table).entrySet()) {
            entries.add(str(e.getKey()) + ": " + e.getValue());
        }
        return "{" + String.join(", ", entries) + "}";
    }

    // --- DLedger (modes dledger and dledgermixed): HarnessSupport, through reflection ---------

    private void waitLeader() throws Exception {
        HarnessSupport.waitLeader(store.getCommitLog());
    }

    /** The DLedger entries and state (HarnessSupport.dledgerSections); each entry must be
     * the record put firstRecord + k. */
    private void dledgerReadBack(int firstRecord) throws Exception {
        extraSections.append(HarnessSupport.dledgerSections(store.getCommitLog(),
            store.getMessageStoreConfig().getStorePathRootDir(), records, firstRecord,
            plainMaxPhyOffset, store.getMinPhyOffset(), store.getMaxPhyOffset()));
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
        recordQueries(keys);
    }

    /** queryMessage of each (topic, key), its answer's commit log offsets into {@code queries}. */
    private void recordQueries(String[][] keys) {
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

    /** (topic, queueId) of every consume queue directory of the store at root, sorted. */
    private static List<Object[]> queueDirs(String root) {
        List<Object[]> found = new ArrayList<>();
        File[] topics = new File(root, "consumequeue").listFiles();
        java.util.Arrays.sort(topics);
        for (File topicDir : topics) {
            File[] queueDirs = topicDir.listFiles();
            java.util.Arrays.sort(queueDirs);
            for (File queueDir : queueDirs) {
                found.add(new Object[] {topicDir.getName(), Integer.parseInt(queueDir.getName())});
            }
        }
        return found;
    }

    /** One line per message reachable through the consume queues, in queue order:
     * topic, queueId, queueOffset, commitLogOffset, size, msgId, bodyCRC, storeTimestamp. */
    private void listQueues(String root, String out) throws Exception {
        List<String> lines = new ArrayList<>();
        for (Object[] q : queueDirs(root)) {
            String topic = (String) q[0];
            int queueId = (Integer) q[1];
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

    private void writeManifest(String path, String mode, boolean cleanShutdown) throws Exception {
        StringBuilder sb = new StringBuilder();
        sb.append("{\n\"rocketmqVersion\": \"4.9.8\",\n\"mode\": ").append(str(mode));
        sb.append(",\n\"cleanShutdown\": ").append(cleanShutdown);
        sb.append(",\n\"config\": {\"mappedFileSizeCommitLog\": ").append(COMMITLOG_FILE_SIZE);
        sb.append(", \"mappedFileSizeConsumeQueue\": ").append(CQ_UNITS * 20);
        sb.append(", \"maxHashSlotNum\": ").append(INDEX_SLOTS);
        sb.append(", \"maxIndexNum\": ").append(INDEX_ENTRIES);
        sb.append(", \"storeHost\": ").append(str(STORE_HOST));
        if (lmqConfig) {
            sb.append(", \"enableLmq\": true, \"enableMultiDispatch\": true");
        }
        if (dledgerPeers != null) {
            sb.append(", \"enableDLegerCommitLog\": true, \"dLegerGroup\": ").append(str(DLEDGER_GROUP));
            sb.append(", \"dLegerSelfId\": ").append(str(DLEDGER_SELF_ID));
            sb.append(", \"dLegerPeers\": ").append(str(dledgerPeers));
        }
        if (mode.equals("dledgermixed")) {
            sb.append(", \"mixedSplitRound\": ").append(MIXED_SPLIT);
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
