// What rocketmq-exporter and rocketmq-dashboard ask a cluster through RocketMQ 4.9.8's own
// admin client (DefaultMQAdminExt): one line per request, "OK <request> <answer>" or
// "FAIL <request> <exception>". Our code; compiled against the classes build_mqadmin.sh
// makes (see ../README.md).
import org.apache.rocketmq.common.protocol.body.BrokerStatsData;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ExporterProbe {
    interface Call { Object run() throws Exception; }

    static int failed = 0;

    static void ask(String what, Call call) {
        try {
            Object answer = call.run();
            String text = String.valueOf(answer instanceof BrokerStatsData
                ? org.apache.rocketmq.remoting.protocol.RemotingSerializable.toJson(answer, false)
                : answer);
            System.out.println("OK " + what + " " + text.replace('\n', ' '));
        } catch (Exception e) {
            failed++;
            System.out.println("FAIL " + what + " " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("exporter-probe-" + System.nanoTime());
        admin.start();
        try {
            ClusterInfo cluster = admin.examineBrokerClusterInfo();
            String clusterName = cluster.getClusterAddrTable().keySet().iterator().next();
            String brokerName = cluster.getClusterAddrTable().get(clusterName).iterator().next();
            String addr = cluster.getBrokerAddrTable().get(brokerName).getBrokerAddrs().get(0L);
            ask("fetchAllTopicList", () -> admin.fetchAllTopicList().getTopicList().contains(topic));
            ask("fetchTopicsByCLuster", () -> admin.fetchTopicsByCLuster(clusterName).getTopicList().contains(topic));
            ask("examineTopicStats", () -> admin.examineTopicStats(topic).getOffsetTable().size());
            ask("queryTopicConsumeByWho", () -> admin.queryTopicConsumeByWho(topic).getGroupList());
            ask("examineConsumeStats", () -> admin.examineConsumeStats(group, topic).computeTotalDiff());
            ask("queryConsumeTimeSpan", () -> admin.queryConsumeTimeSpan(topic, group).size());
            ask("fetchBrokerRuntimeStats", () -> admin.fetchBrokerRuntimeStats(addr).getTable().get("putMessageSizeTotal"));
            ask("getAllProducerInfo", () -> admin.getAllProducerInfo(addr).getData().size());
            String[][] items = {
                {"TOPIC_PUT_NUMS", topic}, {"TOPIC_PUT_SIZE", topic},
                {"GROUP_GET_NUMS", topic + "@" + group}, {"GROUP_GET_SIZE", topic + "@" + group},
                {"GROUP_GET_LATENCY", topic + "@" + group},
                {"BROKER_PUT_NUMS", clusterName}, {"BROKER_GET_NUMS", clusterName},
            };
            for (String[] item : items) {
                ask("viewBrokerStatsData " + item[0] + " " + item[1],
                    () -> admin.viewBrokerStatsData(addr, item[0], item[1]));
            }
            admin.createAndUpdateKvConfig("ORDER_TOPIC_CONFIG", topic, brokerName + ":4");
            ask("getKVListByNamespace ORDER_TOPIC_CONFIG",
                () -> admin.getKVListByNamespace("ORDER_TOPIC_CONFIG").getTable());
            admin.deleteKvConfig("ORDER_TOPIC_CONFIG", topic);
        } finally {
            admin.shutdown();
        }
        System.out.println(failed == 0 ? "done" : failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
