import com.alibaba.fastjson.JSON;
import java.util.*;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.common.protocol.heartbeat.*;
import org.apache.rocketmq.common.protocol.body.*;
import org.apache.rocketmq.common.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import java.nio.ByteBuffer;

public class StandinCheck {
    static int fails = 0;
    static void eq(String what, Object got, Object want) {
        if (!Objects.equals(got, want)) { fails++; System.out.println("FAIL " + what + "\n  got:  " + got + "\n  want: " + want); }
        else System.out.println("ok   " + what);
    }
    public static void main(String[] a) throws Exception {
        // 1. header JSON of a request
        GetRouteInfoRequestHeader h = new GetRouteInfoRequestHeader();
        h.setTopic("T1");
        RemotingCommand cmd = RemotingCommand.createRequestCommand(105, h);
        cmd.setBody(new byte[]{1,2});
        ByteBuffer bb = cmd.encodeHeader();
        int total = bb.getInt(); int lenType = bb.getInt(); int hl = lenType & 0xFFFFFF;
        byte[] hdr = new byte[hl]; bb.get(hdr);
        String hj = new String(hdr, "UTF-8");
        System.out.println("header: " + hj);
        eq("header shape", hj.replaceAll("\"opaque\":\\d+", "\"opaque\":N").replaceAll("\"version\":\\d+","\"version\":V"),
           "{\"code\":105,\"extFields\":{\"topic\":\"T1\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":N,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":V}");
        // decode a response header as a broker might send it
        String resp = "{\"code\":0,\"extFields\":{\"msgId\":\"AB\",\"queueId\":3,\"queueOffset\":\"12\"},\"flag\":1,\"language\":\"PYTHON\",\"opaque\":7,\"remark\":null,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":395,\"unknownThing\":[1,2]}";
        RemotingCommand rc = RemotingCommand.decode(frame(resp));
        eq("decoded code/flag/opaque/lang", rc.getCode()+"/"+rc.getFlag()+"/"+rc.getOpaque()+"/"+rc.getLanguage(), "0/1/7/PYTHON");
        eq("decoded extFields", new TreeMap<>(rc.getExtFields()).toString(), "{msgId=AB, queueId=3, queueOffset=12}");
        // 2. route data with fastjson's unquoted integer keys
        String route = "{\"brokerDatas\":[{\"brokerAddrs\":{0:\"127.0.0.1:10911\"},\"brokerName\":\"b\",\"cluster\":\"c\"}],\"filterServerTable\":{},\"queueDatas\":[{\"brokerName\":\"b\",\"perm\":6,\"readQueueNums\":4,\"topicSysFlag\":0,\"writeQueueNums\":4}]}";
        TopicRouteData trd = TopicRouteData.decode(route.getBytes("UTF-8"), TopicRouteData.class);
        eq("route broker addr", trd.getBrokerDatas().get(0).getBrokerAddrs().get(0L), "127.0.0.1:10911");
        eq("route key type", trd.getBrokerDatas().get(0).getBrokerAddrs().keySet().iterator().next().getClass().getSimpleName(), "Long");
        eq("route queue nums", trd.getQueueDatas().get(0).getWriteQueueNums(), 4);
        eq("route re-encode", trd.toJson(), route);
        // also standard JSON string keys
        TopicRouteData trd2 = TopicRouteData.decode(route.replace("{0:", "{\"0\":").getBytes("UTF-8"), TopicRouteData.class);
        eq("route quoted key", trd2.getBrokerDatas().get(0).getBrokerAddrs().get(0L), "127.0.0.1:10911");
        // 3. heartbeat
        HeartbeatData hb = new HeartbeatData();
        hb.setClientID("1.2.3.4@1");
        ConsumerData cd = new ConsumerData();
        cd.setGroupName("g"); cd.setConsumeType(ConsumeType.CONSUME_PASSIVELY); cd.setMessageModel(org.apache.rocketmq.common.protocol.heartbeat.MessageModel.CLUSTERING);
        cd.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        SubscriptionData sd = new SubscriptionData("T", "a||b"); sd.getTagsSet().add("a"); sd.getCodeSet().add("a".hashCode()); sd.setSubVersion(5); sd.setFilterClassSource("SECRET");
        cd.getSubscriptionDataSet().add(sd);
        hb.getConsumerDataSet().add(cd);
        ProducerData pd = new ProducerData(); pd.setGroupName("pg"); hb.getProducerDataSet().add(pd);
        String hbj = new String(hb.encode(), "UTF-8");
        System.out.println("heartbeat: " + hbj);
        eq("heartbeat", hbj, "{\"clientID\":\"1.2.3.4@1\",\"consumerDataSet\":[{\"consumeFromWhere\":\"CONSUME_FROM_FIRST_OFFSET\",\"consumeType\":\"CONSUME_PASSIVELY\",\"groupName\":\"g\",\"messageModel\":\"CLUSTERING\",\"subscriptionDataSet\":[{\"classFilterMode\":false,\"codeSet\":[97],\"expressionType\":\"TAG\",\"subString\":\"a||b\",\"subVersion\":5,\"tagsSet\":[\"a\"],\"topic\":\"T\"}],\"unitMode\":false}],\"producerDataSet\":[{\"groupName\":\"pg\"}]}");
        HeartbeatData hb2 = HeartbeatData.decode(hbj.getBytes("UTF-8"), HeartbeatData.class);
        eq("heartbeat roundtrip", new String(hb2.encode(), "UTF-8"), hbj);
        // 4. MessageQueue-keyed map (ResetOffsetBody) as fastjson writes it and as a quoted string
        ResetOffsetBody rob = new ResetOffsetBody();
        Map<MessageQueue, Long> m = new HashMap<>(); m.put(new MessageQueue("T","b",1), 42L); rob.setOffsetTable(m);
        String robj = rob.toJson();
        eq("reset offset body", robj, "{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}:42}}");
        ResetOffsetBody rob2 = ResetOffsetBody.decode(robj.getBytes("UTF-8"), ResetOffsetBody.class);
        eq("reset offset roundtrip", rob2.getOffsetTable().get(new MessageQueue("T","b",1)), 42L);
        ResetOffsetBody rob3 = ResetOffsetBody.decode("{\"offsetTable\":{\"{\\\"brokerName\\\":\\\"b\\\",\\\"queueId\\\":1,\\\"topic\\\":\\\"T\\\"}\":42}}".getBytes("UTF-8"), ResetOffsetBody.class);
        eq("reset offset string key", rob3.getOffsetTable().get(new MessageQueue("T","b",1)), 42L);
        // 5. lock batch
        LockBatchResponseBody lb = LockBatchResponseBody.decode("{\"lockOKMQSet\":[{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}]}".getBytes("UTF-8"), LockBatchResponseBody.class);
        eq("lock set", lb.getLockOKMQSet().contains(new MessageQueue("T","b",0)), true);
        // 6. pretty
        eq("pretty", JSON.toJSONString(Collections.singletonMap("a", Arrays.asList(1,2)), true), "{\n\t\"a\":[\n\t\t1,\n\t\t2\n\t]\n}");
        // 7. generic
        Object g = JSON.parseObject("{\"x\":{\"y\":[1,\"z\",null,true,1.5]}}", HashMap.class);
        eq("generic", g.toString(), "{\"x\":{\"y\":[1,\"z\",null,true,1.5]}}");
        System.out.println(fails == 0 ? "ALL OK" : fails + " FAILED");
        System.exit(fails == 0 ? 0 : 1);
    }
    static ByteBuffer frame(String header) throws Exception {
        byte[] h = header.getBytes("UTF-8");
        ByteBuffer b = ByteBuffer.allocate(4 + h.length);
        b.putInt(h.length); b.put(h); b.flip();
        return b;
    }
}
