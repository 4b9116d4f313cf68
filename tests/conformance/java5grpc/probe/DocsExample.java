import java.time.Duration;
import java.util.Map;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The Java snippet of docs/broker.md ("5.x clients (gRPC)"), line for line between the
 * markers, so that the documented code is the code scenarios.sh runs (docs: endpoints
 * "127.0.0.1:8081"; here the harness's port, args[0]). The topic OrderEvents must exist.
 */
public class DocsExample {
    public static void main(String[] args) throws Exception {
        String endpoints = args[0];
        // docs:begin
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoints)
            .build();                                     // TLS, the client's default
        Producer producer = provider.newProducerBuilder().setClientConfiguration(config)
            .setTopics("OrderEvents").build();
        SendReceipt receipt = producer.send(provider.newMessageBuilder().setTopic("OrderEvents")
            .setTag("created").setKeys("order-7").setBody("{}".getBytes()).build());
        System.out.println("sent " + receipt.getMessageId());
        producer.close();

        SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup("my_consumer_group").setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Map.of("OrderEvents", new FilterExpression("created"))).build();
        for (MessageView m : consumer.receive(16, Duration.ofSeconds(30))) {  // invisible 30 s
            System.out.println("received " + m.getMessageId() + " attempt " + m.getDeliveryAttempt());
            consumer.ack(m);                              // not acked: delivered again after 30 s
        }
        consumer.close();
        // docs:end
        Runtime.getRuntime().halt(0);
    }
}
