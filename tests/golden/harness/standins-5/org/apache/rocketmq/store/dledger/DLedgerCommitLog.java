// Stand-in (ours): DLedger is off (enableDLegerCommitLog=false); the store only names this
// class in instanceof checks, a cast and a constructor call it never reaches.
package org.apache.rocketmq.store.dledger;

import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;

public class DLedgerCommitLog extends CommitLog {
    public DLedgerCommitLog(DefaultMessageStore store) {
        super(unsupported(store));
    }

    private static DefaultMessageStore unsupported(DefaultMessageStore store) {
        throw new UnsupportedOperationException("DLedger is not part of this build");
    }

    public Server getdLedgerServer() {
        throw new UnsupportedOperationException("DLedger is not part of this build");
    }

    public interface Server {
        Config getdLedgerConfig();
    }

    public interface Config {
        String getDataStorePath();
    }
}
