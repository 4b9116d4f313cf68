// Stand-in (ours) for fastjson, which is not available offline. The only call the store makes
// here is at shutdown, when the compaction service persists its position map
// (compaction/position-checkpoint) through toJSONString(Object, boolean): a small reflective
// writer (fields, maps, collections, numbers, strings) serves that. build5.sh drops the file,
// since fastjson did not write it. Parsing is never reached (no such file at load).
// With DLedger compiled in (build5_store.sh dledger), DLedger also calls toJSONString(Object)
// (log arguments, evaluated even when the level is off) and toJSONBytes (RPC bodies, which a
// one-member group never sends): the same writer; its RPC client parses the default "{}".
package com.alibaba.fastjson;

import com.alibaba.fastjson.serializer.SerializerFeature;
import java.io.Writer;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.util.Collection;
import java.util.List;
import java.util.Map;

public abstract class JSON {
    private static UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException("fastjson is a stand-in in this build");
    }

    public static String toJSONString(Object object) {
        return toJSONString(object, false);
    }

    public static byte[] toJSONBytes(Object object, SerializerFeature... features) {
        return toJSONString(object, false).getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    public static String toJSONString(Object object, boolean prettyFormat) {
        StringBuilder sb = new StringBuilder();
        write(sb, object);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object value) {
        if (value == null || value instanceof Number || value instanceof Boolean) {
            sb.append(value);
        } else if (value instanceof CharSequence) {
            sb.append('"').append(value.toString().replace("\\", "\\\\").replace("\"", "\\\""))
                .append('"');
        } else if (value instanceof Map) {
            String sep = "";
            sb.append('{');
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                sb.append(sep);
                write(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
                sep = ",";
            }
            sb.append('}');
        } else if (value instanceof Collection) {
            String sep = "";
            sb.append('[');
            for (Object item : (Collection<?>) value) {
                sb.append(sep);
                write(sb, item);
                sep = ",";
            }
            sb.append(']');
        } else {
            String sep = "";
            sb.append('{');
            for (Field f : value.getClass().getDeclaredFields()) {
                if ((f.getModifiers() & (Modifier.STATIC | Modifier.TRANSIENT)) != 0) {
                    continue;
                }
                f.setAccessible(true);
                sb.append(sep);
                write(sb, f.getName());
                sb.append(':');
                try {
                    write(sb, f.get(value));
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
                sep = ",";
            }
            sb.append('}');
        }
    }

    public static String toJSONString(Object object, SerializerFeature... features) {
        throw unsupported();
    }

    public static void writeJSONString(Writer writer, Object object,
        SerializerFeature... features) {
        throw unsupported();
    }

    public static <T> T parseObject(String text, Class<T> clazz) {
        throw unsupported();
    }

    public static <T> T parseObject(byte[] bytes, Class<T> clazz) {
        throw unsupported();
    }

    public static <T> T parseObject(String text, Type type) {
        throw unsupported();
    }

    @SuppressWarnings("unchecked")
    public static <T> T parseObject(String text, TypeReference<T> type) {
        // DLedger's RPC client (RocketMQ's NettyRemotingClient) parses its SOCKS proxy map,
        // "{}" by default, into a Map: an empty one.
        if (text != null && text.trim().equals("{}")) {
            return (T) new java.util.LinkedHashMap<Object, Object>();
        }
        throw unsupported();
    }

    public static <T> List<T> parseArray(String text, Class<T> clazz) {
        throw unsupported();
    }
}
