// rocketstore realbroker stand-in: fastjson 1.2.69's MonetaCodec needs javax.money (not packaged);
// only reached for org.javamoney.moneta.Money, which RocketMQ never serializes.
package com.alibaba.fastjson.support.moneta;
import java.lang.reflect.Type;
import com.alibaba.fastjson.parser.DefaultJSONParser;
import com.alibaba.fastjson.parser.JSONToken;
import com.alibaba.fastjson.parser.deserializer.ObjectDeserializer;
import com.alibaba.fastjson.serializer.JSONSerializer;
import com.alibaba.fastjson.serializer.ObjectSerializer;
public class MonetaCodec implements ObjectSerializer, ObjectDeserializer {
    public static final MonetaCodec instance = new MonetaCodec();
    public void write(JSONSerializer s, Object o, Object f, Type t, int features) { throw new UnsupportedOperationException("moneta"); }
    public <T> T deserialze(DefaultJSONParser p, Type t, Object f) { throw new UnsupportedOperationException("moneta"); }
    public int getFastMatchToken() { return JSONToken.LBRACE; }
}
