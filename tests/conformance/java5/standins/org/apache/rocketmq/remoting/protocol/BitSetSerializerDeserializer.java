// Stand-in (ours): RocketMQ's class implements fastjson's ObjectSerializer/ObjectDeserializer SPI,
// which our fastjson stand-in does not have. Only named by BatchAck's @JSONField (pop batch ack).
package org.apache.rocketmq.remoting.protocol;

public class BitSetSerializerDeserializer {
}
