// What GoldenHarness (RocketMQ 4.9.8) and GoldenHarness5 (5.3.3) share: a JSON string
// literal, a reflective call, and the DLedger read-back of modes dledger/dledgermixed.
// DLedger is reached through reflection only, so this compiles against the stand-ins of
// the builds that have no DLedger, and against either RocketMQ version.
import java.io.File;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;

final class HarnessSupport {
    private HarnessSupport() {
    }

    /** A JSON string literal. */
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

    static Object call(Object target, String name, Object... args) throws Exception {
        for (java.lang.reflect.Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == args.length) {
                return m.invoke(target, args);
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + name);
    }

    /** A DLedger group elects its leader first; appends before that fail (NOT_LEADER). */
    static void waitLeader(Object commitLog) throws Exception {
        Object member = call(call(commitLog, "getdLedgerServer"), "getMemberState");
        for (int i = 0; i < 3000 && !(Boolean) call(member, "isLeader"); i++) {
            Thread.sleep(10);
        }
        if (!(Boolean) call(member, "isLeader")) {
            throw new IllegalStateException("DLedger member n0 did not become leader in 30 s");
        }
    }

    /** The manifest's DLedger sections: every DLedger entry, read back through
     * DLedgerMmapFileStore.get(index), and the DLedger state before the shutdown. Entry k
     * must be the record put firstRecord + k (wroteOffset = entry pos + 48, record size =
     * entry body size): the data files hold nothing the harness did not put.
     * ``plainMaxPhyOffset`` (a mixed log's plain part) is left out when negative. */
    static String dledgerSections(Object commitLog, String rootDir, List<long[]> records,
        int firstRecord, long plainMaxPhyOffset, long minPhyOffset, long maxPhyOffset)
        throws Exception {
        Object server = call(commitLog, "getdLedgerServer");
        Object member = call(server, "getMemberState");
        Object dstore = call(server, "getdLedgerStore");
        Object dconfig = call(server, "getdLedgerConfig");
        long begin = (Long) call(dstore, "getLedgerBeginIndex");
        long end = (Long) call(dstore, "getLedgerEndIndex");
        if (end - begin + 1 != records.size() - firstRecord) {
            throw new IllegalStateException("DLedger holds entries " + begin + ".." + end + ", "
                + (records.size() - firstRecord) + " records were put under DLedger");
        }
        List<String> entries = new ArrayList<>();
        for (long index = begin; index <= end && index >= 0; index++) {
            Object e = call(dstore, "get", Long.valueOf(index));
            long pos = (Long) call(e, "getPos");
            int size = (Integer) call(e, "getSize");
            byte[] body = (byte[]) call(e, "getBody");
            long[] rec = records.get(firstRecord + (int) (index - begin));
            if (rec[0] != pos + 48 || rec[1] != body.length || size != 48 + body.length) {
                throw new IllegalStateException("entry " + index + " at " + pos + " (size " + size
                    + ", body " + body.length + ") is not record " + rec[0] + " (" + rec[1] + ")");
            }
            entries.add("{\"index\":" + call(e, "getIndex") + ",\"term\":" + call(e, "getTerm")
                + ",\"magic\":" + call(e, "getMagic") + ",\"pos\":" + pos + ",\"size\":" + size
                + ",\"channel\":" + call(e, "getChannel") + ",\"chainCrc\":"
                + call(e, "getChainCrc") + ",\"bodyCrc\":" + call(e, "getBodyCrc")
                + ",\"bodyOffset\":" + (pos + 48) + ",\"bodySize\":" + body.length + "}");
        }
        Field divided = commitLog.getClass().getDeclaredField("dividedCommitlogOffset");
        divided.setAccessible(true);
        String root = rootDir + File.separator;
        StringBuilder out = new StringBuilder();
        out.append(",\n\"dledger\": {\"selfId\": ").append(str((String) call(member, "getSelfId")))
            .append(", \"group\": ").append(str((String) call(member, "getGroup")))
            .append(", \"role\": ").append(str(String.valueOf(call(member, "getRole"))))
            .append(", \"leaderId\": ").append(str((String) call(member, "getLeaderId")))
            .append(", \"currTerm\": ").append(call(member, "currTerm"))
            .append(", \"committedIndex\": ").append(call(dstore, "getCommittedIndex"))
            .append(", \"ledgerEndIndex\": ").append(end)
            .append(", \"ledgerBeginIndex\": ").append(begin)
            .append(", \"ledgerEndTerm\": ").append(call(dstore, "getLedgerEndTerm"))
            .append(", \"committedPos\": ").append(call(dstore, "getCommittedPos"))
            .append(", \"writePos\": ").append(call(dstore, "getWritePos"))
            .append(", \"dataStorePath\": ")
            .append(str(((String) call(dconfig, "getDataStorePath")).replace(root, "")))
            .append(", \"indexStorePath\": ")
            .append(str(((String) call(dconfig, "getIndexStorePath")).replace(root, "")))
            .append(", \"mappedFileSizeForEntryData\": ")
            .append(call(dconfig, "getMappedFileSizeForEntryData"))
            .append(", \"mappedFileSizeForEntryIndex\": ")
            .append(call(dconfig, "getMappedFileSizeForEntryIndex"))
            .append("}");
        out.append(",\n\"dividedCommitlogOffset\": ").append(divided.getLong(commitLog));
        if (plainMaxPhyOffset >= 0) {
            out.append(",\n\"plainMaxPhyOffset\": ").append(plainMaxPhyOffset);
        }
        out.append(",\n\"minPhyOffset\": ").append(minPhyOffset);
        out.append(",\n\"maxPhyOffset\": ").append(maxPhyOffset);
        out.append(",\n\"dledgerEntries\": [\n").append(String.join(",\n", entries)).append("\n]");
        return out.toString();
    }
}
