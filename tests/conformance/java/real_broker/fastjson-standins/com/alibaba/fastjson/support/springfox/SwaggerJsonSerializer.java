// rocketstore realbroker stand-in: needs springfox (not packaged); only reached for springfox's Json.
package com.alibaba.fastjson.support.springfox;
import java.lang.reflect.Type;
import com.alibaba.fastjson.serializer.JSONSerializer;
import com.alibaba.fastjson.serializer.ObjectSerializer;
public class SwaggerJsonSerializer implements ObjectSerializer {
    public final static SwaggerJsonSerializer instance = new SwaggerJsonSerializer();
    public void write(JSONSerializer s, Object o, Object f, Type t, int features) { throw new UnsupportedOperationException("springfox"); }
}
