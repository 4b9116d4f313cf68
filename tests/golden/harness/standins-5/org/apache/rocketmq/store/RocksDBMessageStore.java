// Stand-in (ours): the RocksDB consume queue store is off (default storeType); the store only
// names this class for a RocksDB double-write mode it never enters.
package org.apache.rocketmq.store;

import java.io.IOException;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

public class RocksDBMessageStore extends DefaultMessageStore {
    public RocksDBMessageStore(MessageStoreConfig config, BrokerStatsManager stats,
        MessageArrivingListener listener, BrokerConfig brokerConfig,
        ConcurrentMap<String, TopicConfig> topics) throws IOException {
        super(unsupported(config), stats, listener, brokerConfig, topics);
    }

    private static MessageStoreConfig unsupported(MessageStoreConfig config) {
        throw new UnsupportedOperationException("RocksDB is not part of this build");
    }

    public void loadAndStartConsumerServiceOnly() {
        throw new UnsupportedOperationException("RocksDB is not part of this build");
    }

    public CommitLogDispatcher getDispatcherBuildRocksdbConsumeQueue() {
        throw new UnsupportedOperationException("RocksDB is not part of this build");
    }
}
