// Stand-in (ours, written from fastjson's documented behaviour, not its code) for the part of
// fastjson 1.2.x that RocketMQ 4.9.8's client, common and remoting modules call:
//   JSON.toJSONString(obj), toJSONString(obj, prettyFormat), toJSONString(obj, features...),
//   JSON.parseObject(text, Class), JSON.parseArray(text, Class), @JSONField(serialize = false).
//
// Writing follows fastjson's defaults, since the point is to put on the wire what the real
// client puts there:
//   * beans are written from their public getters (getX / isX) plus public fields, properties
//     sorted by name (SortField), null values left out (no WriteMapNullValue), getters whose
//     same-named field is transient left out (SkipTransientField), @JSONField(serialize=false)
//     on the getter or the field honoured;
//   * enums by name, Date as epoch millis, byte[] as base64, Atomic* as their value;
//   * maps in iteration order; a non-String key is written as its JSON unquoted, e.g. {0:"a"}
//     for Long keys or {{"brokerName":"b","queueId":0,"topic":"t"}:5} for MessageQueue keys
//     (quoted as a JSON string only with SerializerFeature.WriteNonStringKeyAsString);
//   * prettyFormat: tab indentation, no space after ':'.
// Parsing is lenient like fastjson's: unquoted or single-quoted keys, numeric keys, object
// keys, extra commas, comments. Binding uses setters (any visibility of the no-arg
// constructor), public fields, getter-only Collection/Map/Atomic properties, case- and
// '_'/'-'-insensitive name matching, unknown properties ignored, scalars coerced (numbers
// from strings, strings from numbers, enums from names or ordinals), generic element types
// followed, map keys converted to the declared key type (a bean key may be an object or a
// string holding its JSON).
package com.alibaba.fastjson;

import com.alibaba.fastjson.annotation.JSONField;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.lang.reflect.Array;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.GenericArrayType;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Parameter;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.lang.reflect.TypeVariable;
import java.lang.reflect.WildcardType;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.Date;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.NavigableMap;
import java.util.NavigableSet;
import java.util.Properties;
import java.util.Queue;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

public abstract class JSON {

    // ------------------------------------------------------------------ public API: writing

    public static String toJSONString(Object object) {
        return new Writer(false, false, false).write(object);
    }

    public static String toJSONString(Object object, boolean prettyFormat) {
        return new Writer(prettyFormat, false, false).write(object);
    }

    public static String toJSONString(Object object, SerializerFeature... features) {
        boolean pretty = false;
        boolean nulls = false;
        boolean keyAsString = false;
        if (features != null) {
            for (SerializerFeature f : features) {
                if (f == SerializerFeature.PrettyFormat) {
                    pretty = true;
                } else if (f == SerializerFeature.WriteMapNullValue) {
                    nulls = true;
                } else if (f == SerializerFeature.WriteNonStringKeyAsString) {
                    keyAsString = true;
                }
            }
        }
        return new Writer(pretty, nulls, keyAsString).write(object);
    }

    public static byte[] toJSONBytes(Object object, SerializerFeature... features) {
        return toJSONString(object, features).getBytes(StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------------ public API: parsing

    public static Object parse(String text) {
        if (text == null) {
            return null;
        }
        return new Parser(text).parseDocument();
    }

    public static JSONObject parseObject(String text) {
        Object v = parse(text);
        if (v == null || v instanceof JSONObject) {
            return (JSONObject) v;
        }
        return convert(v, JSONObject.class);
    }

    public static <T> T parseObject(String text, Class<T> clazz) {
        return parseObject(text, (Type) clazz);
    }

    @SuppressWarnings("unchecked")
    public static <T> T parseObject(String text, Type type) {
        if (text == null || text.trim().isEmpty()) {
            return null;
        }
        return (T) convertType(parse(text), type);
    }

    public static <T> T parseObject(String text, TypeReference<T> typeReference) {
        return parseObject(text, typeReference.getType());
    }

    public static <T> T parseObject(byte[] bytes, Class<T> clazz) {
        return bytes == null ? null : parseObject(new String(bytes, StandardCharsets.UTF_8), (Type) clazz);
    }

    public static <T> T parseObject(byte[] bytes, Type type) {
        return bytes == null ? null : parseObject(new String(bytes, StandardCharsets.UTF_8), type);
    }

    public static JSONArray parseArray(String text) {
        Object v = parse(text);
        if (v == null || v instanceof JSONArray) {
            return (JSONArray) v;
        }
        throw new JSONException("not a JSON array: " + abbreviate(text));
    }

    @SuppressWarnings("unchecked")
    public static <T> List<T> parseArray(String text, Class<T> clazz) {
        JSONArray array = parseArray(text);
        if (array == null) {
            return null;
        }
        List<T> out = new ArrayList<T>(array.size());
        for (Object o : array) {
            out.add((T) convertType(o, clazz));
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    public static <T> T toJavaObject(Object json, Class<T> clazz) {
        return (T) convertType(json, clazz);
    }

    /** Converts a parsed value (or any value) to the given class, as binding would. */
    @SuppressWarnings("unchecked")
    static <T> T convert(Object value, Class<T> clazz) {
        return (T) convertType(value, clazz);
    }

    private static String abbreviate(String s) {
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }

    // ================================================================== writer

    private static final class Writer {
        private final StringBuilder sb = new StringBuilder();
        private final boolean pretty;
        private final boolean writeNulls;
        private final boolean keyAsString;
        private final IdentityHashMap<Object, Boolean> stack = new IdentityHashMap<Object, Boolean>();
        private int depth;

        Writer(boolean pretty, boolean writeNulls, boolean keyAsString) {
            this.pretty = pretty;
            this.writeNulls = writeNulls;
            this.keyAsString = keyAsString;
        }

        String write(Object o) {
            value(o);
            return sb.toString();
        }

        private void newline() {
            if (pretty) {
                sb.append('\n');
                for (int i = 0; i < depth; i++) {
                    sb.append('\t');
                }
            }
        }

        private void string(String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"':
                        sb.append("\\\"");
                        break;
                    case '\\':
                        sb.append("\\\\");
                        break;
                    case '\n':
                        sb.append("\\n");
                        break;
                    case '\r':
                        sb.append("\\r");
                        break;
                    case '\t':
                        sb.append("\\t");
                        break;
                    case '\b':
                        sb.append("\\b");
                        break;
                    case '\f':
                        sb.append("\\f");
                        break;
                    default:
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        }

        private void value(Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof String) {
                string((String) v);
            } else if (v instanceof Character) {
                string(v.toString());
            } else if (v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Double || v instanceof Float) {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) {
                    sb.append("null");
                } else {
                    sb.append(v);
                }
            } else if (v instanceof BigDecimal) {
                sb.append(((BigDecimal) v).toString());
            } else if (v instanceof Number) {
                sb.append(v.toString());
            } else if (v instanceof AtomicBoolean) {
                sb.append(((AtomicBoolean) v).get());
            } else if (v instanceof Enum) {
                string(((Enum<?>) v).name());
            } else if (v instanceof byte[]) {
                string(Base64.getEncoder().encodeToString((byte[]) v));
            } else if (v instanceof Date) {
                sb.append(((Date) v).getTime());
            } else if (v instanceof Class) {
                string(((Class<?>) v).getName());
            } else if (v instanceof Map) {
                enter(v);
                map((Map<?, ?>) v);
                stack.remove(v);
            } else if (v instanceof Collection) {
                enter(v);
                list(((Collection<?>) v).toArray());
                stack.remove(v);
            } else if (v.getClass().isArray()) {
                int n = Array.getLength(v);
                Object[] items = new Object[n];
                for (int i = 0; i < n; i++) {
                    items[i] = Array.get(v, i);
                }
                list(items);
            } else if (isOpaqueJdkValue(v.getClass())) {
                string(v.toString());
            } else {
                enter(v);
                bean(v);
                stack.remove(v);
            }
        }

        private void enter(Object v) {
            if (stack.put(v, Boolean.TRUE) != null) {
                throw new JSONException("circular reference while writing " + v.getClass().getName());
            }
        }

        private void list(Object[] items) {
            if (items.length == 0) {
                sb.append("[]");
                return;
            }
            sb.append('[');
            depth++;
            for (int i = 0; i < items.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                newline();
                value(items[i]);
            }
            depth--;
            newline();
            sb.append(']');
        }

        private void map(Map<?, ?> m) {
            boolean any = false;
            sb.append('{');
            depth++;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                Object val = e.getValue();
                if (val == null && !writeNulls) {
                    continue;
                }
                if (any) {
                    sb.append(',');
                }
                any = true;
                newline();
                Object k = e.getKey();
                if (k == null) {
                    sb.append("null");
                } else if (k instanceof String) {
                    string((String) k);
                } else if (keyAsString && !(k instanceof Enum)) {
                    string(toJSONString(k));
                } else {
                    value(k);
                }
                sb.append(':');
                value(val);
            }
            depth--;
            if (any) {
                newline();
            }
            sb.append('}');
        }

        private void bean(Object o) {
            boolean any = false;
            sb.append('{');
            depth++;
            for (Getter g : getters(o.getClass())) {
                Object val = g.get(o);
                if (val == null && !writeNulls) {
                    continue;
                }
                if (any) {
                    sb.append(',');
                }
                any = true;
                newline();
                string(g.name);
                sb.append(':');
                value(val);
            }
            depth--;
            if (any) {
                newline();
            }
            sb.append('}');
        }
    }

    private static boolean isOpaqueJdkValue(Class<?> c) {
        String n = c.getName();
        return (n.startsWith("java.") || n.startsWith("javax.") || n.startsWith("sun."))
            && !Map.class.isAssignableFrom(c) && !Collection.class.isAssignableFrom(c);
    }

    // ------------------------------------------------------------------ bean introspection

    private static final class Getter {
        final String name;
        final Method method;
        final Field field;

        Getter(String name, Method method, Field field) {
            this.name = name;
            this.method = method;
            this.field = field;
        }

        Object get(Object target) {
            try {
                return method != null ? method.invoke(target) : field.get(target);
            } catch (InvocationTargetException e) {
                throw new JSONException("getter " + name + " of " + target.getClass().getName() + " failed",
                    e.getCause());
            } catch (IllegalAccessException e) {
                throw new JSONException("cannot read " + name + " of " + target.getClass().getName(), e);
            }
        }
    }

    private static final Map<Class<?>, List<Getter>> GETTERS = new ConcurrentHashMap<Class<?>, List<Getter>>();
    private static final Map<Class<?>, Map<String, Setter>> SETTERS = new ConcurrentHashMap<Class<?>, Map<String, Setter>>();

    private static Field findField(Class<?> c, String name) {
        for (Class<?> k = c; k != null && k != Object.class; k = k.getSuperclass()) {
            try {
                return k.getDeclaredField(name);
            } catch (NoSuchFieldException ignored) {
                // keep looking in the superclass
            }
        }
        return null;
    }

    private static String decap(String s) {
        return Character.toLowerCase(s.charAt(0)) + s.substring(1);
    }

    private static List<Getter> getters(Class<?> c) {
        List<Getter> cached = GETTERS.get(c);
        if (cached != null) {
            return cached;
        }
        Map<String, Getter> byName = new TreeMap<String, Getter>();
        for (Method m : c.getMethods()) {
            if (Modifier.isStatic(m.getModifiers()) || m.getParameterCount() != 0
                || m.getReturnType() == void.class || m.getDeclaringClass() == Object.class) {
                continue;
            }
            String mn = m.getName();
            String prop;
            if (mn.startsWith("get") && mn.length() > 3
                && (Character.isUpperCase(mn.charAt(3)) || mn.charAt(3) > 512)) {
                prop = decap(mn.substring(3));
            } else if (mn.startsWith("is") && mn.length() > 2
                && (m.getReturnType() == boolean.class || m.getReturnType() == Boolean.class)
                && (Character.isUpperCase(mn.charAt(2)) || mn.charAt(2) > 512)) {
                prop = decap(mn.substring(2));
            } else {
                continue;
            }
            Field f = findField(c, prop);
            if (f == null && mn.startsWith("is")) {
                f = findField(c, mn);
            }
            if (f != null && Modifier.isTransient(f.getModifiers())) {
                continue;
            }
            JSONField ann = m.getAnnotation(JSONField.class);
            if (ann == null && f != null) {
                ann = f.getAnnotation(JSONField.class);
            }
            if (ann != null && !ann.serialize()) {
                continue;
            }
            if (ann != null && !ann.name().isEmpty()) {
                prop = ann.name();
            }
            try {
                m.setAccessible(true);
            } catch (RuntimeException ignored) {
                // public method of a public class: callable anyway
            }
            byName.put(prop, new Getter(prop, m, null));
        }
        for (Field f : c.getFields()) {
            int mod = f.getModifiers();
            if (Modifier.isStatic(mod) || Modifier.isTransient(mod)) {
                continue;
            }
            JSONField ann = f.getAnnotation(JSONField.class);
            if (ann != null && !ann.serialize()) {
                continue;
            }
            String prop = ann != null && !ann.name().isEmpty() ? ann.name() : f.getName();
            if (!byName.containsKey(prop)) {
                byName.put(prop, new Getter(prop, null, f));
            }
        }
        List<Getter> list = Collections.unmodifiableList(new ArrayList<Getter>(byName.values()));
        GETTERS.put(c, list);
        return list;
    }

    private static final class Setter {
        final String name;
        final Method method;       // setX(value)
        final Field field;         // public field
        final Method getterOnly;   // getX() returning a Collection / Map / Atomic* to fill
        final Type type;

        Setter(String name, Method method, Field field, Method getterOnly, Type type) {
            this.name = name;
            this.method = method;
            this.field = field;
            this.getterOnly = getterOnly;
            this.type = type;
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        void set(Object target, Object raw) {
            Object v = convertType(raw, type);
            if (v == null && rawClass(type).isPrimitive()) {
                return;
            }
            try {
                if (method != null) {
                    method.invoke(target, v);
                } else if (field != null) {
                    field.set(target, v);
                } else if (v != null) {
                    Object current = getterOnly.invoke(target);
                    if (current instanceof Collection) {
                        ((Collection) current).clear();
                        ((Collection) current).addAll((Collection) v);
                    } else if (current instanceof Map) {
                        ((Map) current).clear();
                        ((Map) current).putAll((Map) v);
                    } else if (current instanceof AtomicLong) {
                        ((AtomicLong) current).set(((AtomicLong) v).get());
                    } else if (current instanceof AtomicInteger) {
                        ((AtomicInteger) current).set(((AtomicInteger) v).get());
                    } else if (current instanceof AtomicBoolean) {
                        ((AtomicBoolean) current).set(((AtomicBoolean) v).get());
                    }
                }
            } catch (InvocationTargetException e) {
                throw new JSONException("setting " + name + " of " + target.getClass().getName() + " failed",
                    e.getCause());
            } catch (IllegalAccessException e) {
                throw new JSONException("cannot set " + name + " of " + target.getClass().getName(), e);
            }
        }
    }

    private static boolean fillable(Class<?> c) {
        return Collection.class.isAssignableFrom(c) || Map.class.isAssignableFrom(c)
            || c == AtomicLong.class || c == AtomicInteger.class || c == AtomicBoolean.class;
    }

    private static Map<String, Setter> setters(Class<?> c) {
        Map<String, Setter> cached = SETTERS.get(c);
        if (cached != null) {
            return cached;
        }
        Map<String, Setter> byName = new LinkedHashMap<String, Setter>();
        for (Method m : c.getMethods()) {
            String mn = m.getName();
            if (Modifier.isStatic(m.getModifiers()) || m.getParameterCount() != 1 || !mn.startsWith("set")
                || mn.length() <= 3) {
                continue;
            }
            String prop = decap(mn.substring(3));
            Field f = findField(c, prop);
            JSONField ann = m.getAnnotation(JSONField.class);
            if (ann == null && f != null) {
                ann = f.getAnnotation(JSONField.class);
            }
            if (ann != null && !ann.deserialize()) {
                continue;
            }
            if (ann != null && !ann.name().isEmpty()) {
                prop = ann.name();
            }
            try {
                m.setAccessible(true);
            } catch (RuntimeException ignored) {
                // callable anyway
            }
            byName.put(prop, new Setter(prop, m, null, null, m.getGenericParameterTypes()[0]));
        }
        for (Field f : c.getFields()) {
            int mod = f.getModifiers();
            if (Modifier.isStatic(mod) || Modifier.isFinal(mod) || byName.containsKey(f.getName())) {
                continue;
            }
            JSONField ann = f.getAnnotation(JSONField.class);
            if (ann != null && !ann.deserialize()) {
                continue;
            }
            byName.put(f.getName(), new Setter(f.getName(), null, f, null, f.getGenericType()));
        }
        for (Method m : c.getMethods()) {
            String mn = m.getName();
            if (Modifier.isStatic(m.getModifiers()) || m.getParameterCount() != 0 || !mn.startsWith("get")
                || mn.length() <= 3 || !fillable(m.getReturnType())) {
                continue;
            }
            String prop = decap(mn.substring(3));
            if (!byName.containsKey(prop)) {
                byName.put(prop, new Setter(prop, null, null, m, m.getGenericReturnType()));
            }
        }
        SETTERS.put(c, byName);
        return byName;
    }

    private static String smart(String key) {
        return key.replace("_", "").replace("-", "").toLowerCase(Locale.ROOT);
    }

    private static Setter findSetter(Map<String, Setter> setters, String key) {
        Setter s = setters.get(key);
        if (s != null) {
            return s;
        }
        String wanted = smart(key);
        for (Setter cand : setters.values()) {
            if (smart(cand.name).equals(wanted)) {
                return cand;
            }
        }
        if (wanted.startsWith("is") && wanted.length() > 2) {
            String rest = wanted.substring(2);
            for (Setter cand : setters.values()) {
                if (smart(cand.name).equals(rest)) {
                    return cand;
                }
            }
        }
        return null;
    }

    // ================================================================== binding

    private static Class<?> rawClass(Type t) {
        if (t instanceof Class) {
            return (Class<?>) t;
        }
        if (t instanceof ParameterizedType) {
            return rawClass(((ParameterizedType) t).getRawType());
        }
        if (t instanceof GenericArrayType) {
            return Array.newInstance(rawClass(((GenericArrayType) t).getGenericComponentType()), 0).getClass();
        }
        if (t instanceof WildcardType) {
            Type[] upper = ((WildcardType) t).getUpperBounds();
            return upper.length > 0 ? rawClass(upper[0]) : Object.class;
        }
        if (t instanceof TypeVariable) {
            Type[] bounds = ((TypeVariable<?>) t).getBounds();
            return bounds.length > 0 ? rawClass(bounds[0]) : Object.class;
        }
        return Object.class;
    }

    private static Type typeArg(Type t, int i) {
        if (t instanceof ParameterizedType) {
            Type[] args = ((ParameterizedType) t).getActualTypeArguments();
            if (i < args.length) {
                return args[i];
            }
        }
        return Object.class;
    }

    private static boolean isScalarTarget(Class<?> c) {
        return c.isPrimitive() || c == String.class || Number.class.isAssignableFrom(c) || c == Boolean.class
            || c == Character.class || c.isEnum() || c == AtomicBoolean.class || c == Date.class
            || c == byte[].class || c == Class.class;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Object convertType(Object v, Type type) {
        Class<?> c = rawClass(type);
        if (v == null) {
            return c.isPrimitive() ? primitiveDefault(c) : null;
        }
        if (c == Object.class) {
            return v;
        }
        if (type instanceof Class && c.isInstance(v) && !(c.isArray())) {
            return v;
        }
        if (c == String.class) {
            if (v instanceof String) {
                return v;
            }
            if (v instanceof Map || v instanceof Collection) {
                return toJSONString(v);
            }
            return v.toString();
        }
        if (c.isPrimitive() || Number.class.isAssignableFrom(c) || c == Boolean.class || c == Character.class) {
            return scalar(v, c);
        }
        if (c == AtomicBoolean.class) {
            return new AtomicBoolean((Boolean) scalar(v, Boolean.class));
        }
        if (c.isEnum()) {
            if (v instanceof Number) {
                Object[] constants = c.getEnumConstants();
                int idx = ((Number) v).intValue();
                return idx >= 0 && idx < constants.length ? constants[idx] : null;
            }
            String name = v.toString();
            for (Object e : c.getEnumConstants()) {
                if (((Enum<?>) e).name().equals(name)) {
                    return e;
                }
            }
            return null;
        }
        if (c == byte[].class && v instanceof String) {
            return Base64.getDecoder().decode((String) v);
        }
        if (c == Date.class) {
            return new Date(((Number) scalar(v, Long.class)).longValue());
        }
        if (c == Class.class) {
            return null;
        }
        if (v instanceof String && !isScalarTarget(c)) {
            String s = ((String) v).trim();
            if (s.isEmpty() || "null".equals(s)) {
                return null;
            }
            return convertType(parse(s), type);
        }
        if (c.isArray()) {
            Type component = type instanceof GenericArrayType
                ? ((GenericArrayType) type).getGenericComponentType() : c.getComponentType();
            Collection<?> items = asCollection(v);
            Object arr = Array.newInstance(c.getComponentType(), items.size());
            int i = 0;
            for (Object item : items) {
                Array.set(arr, i++, convertType(item, component));
            }
            return arr;
        }
        if (Collection.class.isAssignableFrom(c)) {
            Collection out = newCollection(c);
            Type elem = typeArg(type, 0);
            for (Object item : asCollection(v)) {
                out.add(convertType(item, elem));
            }
            return out;
        }
        if (Map.class.isAssignableFrom(c)) {
            if (!(v instanceof Map)) {
                throw new JSONException("cannot bind " + v.getClass().getSimpleName() + " to " + type);
            }
            Map out = newMap(c);
            Type kt = typeArg(type, 0);
            Type vt = typeArg(type, 1);
            boolean noNulls = out instanceof ConcurrentMap;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                Object val = convertType(e.getValue(), vt);
                if (val == null && noNulls) {
                    continue;
                }
                out.put(convertKey(e.getKey(), kt), val);
            }
            return out;
        }
        if (!(v instanceof Map)) {
            throw new JSONException("cannot bind " + v.getClass().getSimpleName() + " to " + type);
        }
        return bindBean((Map<?, ?>) v, c);
    }

    private static Object convertKey(Object k, Type kt) {
        Class<?> kc = rawClass(kt);
        if (k == null) {
            return null;
        }
        if (kc == String.class && !(k instanceof String)) {
            return k instanceof Map || k instanceof Collection ? toJSONString(k) : k.toString();
        }
        return convertType(k, kt);
    }

    private static Collection<?> asCollection(Object v) {
        if (v instanceof Collection) {
            return (Collection<?>) v;
        }
        if (v.getClass().isArray()) {
            List<Object> out = new ArrayList<Object>();
            for (int i = 0; i < Array.getLength(v); i++) {
                out.add(Array.get(v, i));
            }
            return out;
        }
        return Collections.singletonList(v);
    }

    @SuppressWarnings("rawtypes")
    private static Collection newCollection(Class<?> c) {
        if (!c.isInterface() && !Modifier.isAbstract(c.getModifiers())) {
            try {
                Constructor<?> ctor = c.getDeclaredConstructor();
                ctor.setAccessible(true);
                return (Collection) ctor.newInstance();
            } catch (ReflectiveOperationException e) {
                throw new JSONException("cannot create " + c.getName(), e);
            }
        }
        if (c == EnumSet.class) {
            throw new JSONException("EnumSet without element type");
        }
        if (SortedSet.class.isAssignableFrom(c) || NavigableSet.class.isAssignableFrom(c)) {
            return new TreeSet();
        }
        if (Set.class.isAssignableFrom(c)) {
            return new HashSet();
        }
        if (Queue.class.isAssignableFrom(c) && !List.class.isAssignableFrom(c)) {
            return new ArrayDeque();
        }
        return new ArrayList();
    }

    @SuppressWarnings("rawtypes")
    private static Map newMap(Class<?> c) {
        if (!c.isInterface() && !Modifier.isAbstract(c.getModifiers())) {
            try {
                Constructor<?> ctor = c.getDeclaredConstructor();
                ctor.setAccessible(true);
                return (Map) ctor.newInstance();
            } catch (ReflectiveOperationException e) {
                throw new JSONException("cannot create " + c.getName(), e);
            }
        }
        if (ConcurrentNavigableMap.class.isAssignableFrom(c)) {
            return new ConcurrentSkipListMap();
        }
        if (ConcurrentMap.class.isAssignableFrom(c)) {
            return new ConcurrentHashMap();
        }
        if (SortedMap.class.isAssignableFrom(c) || NavigableMap.class.isAssignableFrom(c)) {
            return new TreeMap();
        }
        if (c == Properties.class) {
            return new Properties();
        }
        return new HashMap();
    }

    private static Object primitiveDefault(Class<?> c) {
        if (c == boolean.class) {
            return Boolean.FALSE;
        }
        if (c == char.class) {
            return '\0';
        }
        return scalar(0, c);
    }

    private static Object scalar(Object v, Class<?> c) {
        if (c == boolean.class || c == Boolean.class) {
            if (v instanceof Boolean) {
                return v;
            }
            if (v instanceof Number) {
                return ((Number) v).intValue() != 0;
            }
            String s = v.toString().trim();
            return "true".equalsIgnoreCase(s) || "1".equals(s) || "Y".equalsIgnoreCase(s);
        }
        if (c == char.class || c == Character.class) {
            String s = v.toString();
            return s.isEmpty() ? (c == char.class ? '\0' : null) : s.charAt(0);
        }
        BigDecimal d;
        if (v instanceof BigDecimal) {
            d = (BigDecimal) v;
        } else if (v instanceof BigInteger) {
            d = new BigDecimal((BigInteger) v);
        } else if (v instanceof Number) {
            Number n = (Number) v;
            if (v instanceof Double || v instanceof Float) {
                d = BigDecimal.valueOf(n.doubleValue());
            } else {
                d = BigDecimal.valueOf(n.longValue());
            }
        } else if (v instanceof Boolean) {
            d = ((Boolean) v) ? BigDecimal.ONE : BigDecimal.ZERO;
        } else {
            String s = v.toString().trim();
            if (s.isEmpty() || "null".equals(s)) {
                return c.isPrimitive() ? primitiveDefault(c) : null;
            }
            d = new BigDecimal(s);
        }
        if (c == int.class || c == Integer.class) {
            return d.intValue();
        }
        if (c == long.class || c == Long.class) {
            return d.longValue();
        }
        if (c == short.class || c == Short.class) {
            return d.shortValue();
        }
        if (c == byte.class || c == Byte.class) {
            return d.byteValue();
        }
        if (c == double.class || c == Double.class) {
            return d.doubleValue();
        }
        if (c == float.class || c == Float.class) {
            return d.floatValue();
        }
        if (c == BigDecimal.class) {
            return d;
        }
        if (c == BigInteger.class) {
            return d.toBigInteger();
        }
        if (c == AtomicLong.class) {
            return new AtomicLong(d.longValue());
        }
        if (c == AtomicInteger.class) {
            return new AtomicInteger(d.intValue());
        }
        if (c == Number.class) {
            return v instanceof Number ? v : d;
        }
        throw new JSONException("cannot convert " + v + " to " + c.getName());
    }

    private static Object bindBean(Map<?, ?> obj, Class<?> c) {
        Object target;
        Map<String, Setter> setters = setters(c);
        Set<Object> consumed = new HashSet<Object>();
        try {
            Constructor<?> noArg = null;
            try {
                noArg = c.getDeclaredConstructor();
            } catch (NoSuchMethodException ignored) {
                // fall back to a constructor with named parameters
            }
            if (noArg != null) {
                noArg.setAccessible(true);
                target = noArg.newInstance();
            } else {
                Constructor<?> best = null;
                for (Constructor<?> ctor : c.getDeclaredConstructors()) {
                    if (best == null || ctor.getParameterCount() > best.getParameterCount()) {
                        best = ctor;
                    }
                }
                if (best == null) {
                    throw new JSONException("no constructor for " + c.getName());
                }
                Parameter[] params = best.getParameters();
                Object[] args = new Object[params.length];
                for (int i = 0; i < params.length; i++) {
                    Object key = null;
                    if (params[i].isNamePresent()) {
                        for (Object k : obj.keySet()) {
                            if (k instanceof String && smart((String) k).equals(smart(params[i].getName()))) {
                                key = k;
                                break;
                            }
                        }
                    }
                    args[i] = convertType(key == null ? null : obj.get(key), params[i].getParameterizedType());
                    if (key != null) {
                        consumed.add(key);
                    }
                }
                best.setAccessible(true);
                target = best.newInstance(args);
            }
        } catch (InvocationTargetException e) {
            throw new JSONException("constructor of " + c.getName() + " failed", e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new JSONException("cannot create " + c.getName(), e);
        }
        for (Map.Entry<?, ?> e : obj.entrySet()) {
            if (!(e.getKey() instanceof String) || consumed.contains(e.getKey())) {
                continue;
            }
            Setter s = findSetter(setters, (String) e.getKey());
            if (s != null) {
                s.set(target, e.getValue());
            }
        }
        return target;
    }

    // ================================================================== parser

    private static final class Parser {
        private final String s;
        private int pos;

        Parser(String s) {
            this.s = s;
        }

        Object parseDocument() {
            skip();
            if (pos >= s.length()) {
                return null;
            }
            Object v = value();
            skip();
            if (pos < s.length()) {
                throw error("unexpected trailing text");
            }
            return v;
        }

        private JSONException error(String what) {
            int from = Math.max(0, pos - 40);
            int to = Math.min(s.length(), pos + 40);
            return new JSONException(what + " at " + pos + ": ..." + s.substring(from, to) + "...");
        }

        private void skip() {
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (Character.isWhitespace(c) || c == '\u0000' || c == '\uFEFF') {
                    pos++;
                } else if (c == '/' && pos + 1 < s.length() && s.charAt(pos + 1) == '/') {
                    while (pos < s.length() && s.charAt(pos) != '\n') {
                        pos++;
                    }
                } else if (c == '/' && pos + 1 < s.length() && s.charAt(pos + 1) == '*') {
                    int end = s.indexOf("*/", pos + 2);
                    pos = end < 0 ? s.length() : end + 2;
                } else {
                    break;
                }
            }
        }

        private Object value() {
            skip();
            if (pos >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(pos);
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                case '\'':
                    return string();
                default:
                    if (c == '-' || c == '+' || (c >= '0' && c <= '9') || c == '.') {
                        return number();
                    }
                    String word = identifier();
                    if ("true".equals(word)) {
                        return Boolean.TRUE;
                    }
                    if ("false".equals(word)) {
                        return Boolean.FALSE;
                    }
                    if ("null".equals(word) || "undefined".equals(word)) {
                        return null;
                    }
                    throw error("unexpected token '" + word + "'");
            }
        }

        private String identifier() {
            int start = pos;
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (Character.isLetterOrDigit(c) || c == '_' || c == '$' || c == '.' || c == '-') {
                    pos++;
                } else {
                    break;
                }
            }
            if (start == pos) {
                throw error("unexpected character '" + s.charAt(pos) + "'");
            }
            return s.substring(start, pos);
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        private JSONObject object() {
            pos++; // '{'
            JSONObject obj = new JSONObject();
            Map raw = obj;
            while (true) {
                skip();
                if (pos >= s.length()) {
                    throw error("unterminated object");
                }
                char c = s.charAt(pos);
                if (c == '}') {
                    pos++;
                    return obj;
                }
                if (c == ',') {
                    pos++;
                    continue;
                }
                Object key;
                if (c == '"' || c == '\'') {
                    key = string();
                } else if (c == '{' || c == '[') {
                    key = value();
                } else if (c == '-' || (c >= '0' && c <= '9')) {
                    key = number();
                } else {
                    key = identifier();
                }
                skip();
                if (pos >= s.length() || s.charAt(pos) != ':') {
                    throw error("expected ':'");
                }
                pos++;
                raw.put(key, value());
            }
        }

        private JSONArray array() {
            pos++; // '['
            JSONArray arr = new JSONArray();
            boolean expectValue = true;
            while (true) {
                skip();
                if (pos >= s.length()) {
                    throw error("unterminated array");
                }
                char c = s.charAt(pos);
                if (c == ']') {
                    pos++;
                    return arr;
                }
                if (c == ',') {
                    pos++;
                    if (expectValue) {
                        arr.add(null);
                    }
                    expectValue = true;
                    continue;
                }
                arr.add(value());
                expectValue = false;
            }
        }

        private String string() {
            char quote = s.charAt(pos++);
            StringBuilder sb = new StringBuilder();
            while (true) {
                if (pos >= s.length()) {
                    throw error("unterminated string");
                }
                char c = s.charAt(pos++);
                if (c == quote) {
                    return sb.toString();
                }
                if (c != '\\') {
                    sb.append(c);
                    continue;
                }
                if (pos >= s.length()) {
                    throw error("unterminated escape");
                }
                char e = s.charAt(pos++);
                switch (e) {
                    case 'n':
                        sb.append('\n');
                        break;
                    case 'r':
                        sb.append('\r');
                        break;
                    case 't':
                        sb.append('\t');
                        break;
                    case 'b':
                        sb.append('\b');
                        break;
                    case 'f':
                        sb.append('\f');
                        break;
                    case '0':
                        sb.append('\0');
                        break;
                    case 'u':
                        if (pos + 4 > s.length()) {
                            throw error("bad unicode escape");
                        }
                        sb.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                        pos += 4;
                        break;
                    case 'x':
                        sb.append((char) Integer.parseInt(s.substring(pos, pos + 2), 16));
                        pos += 2;
                        break;
                    default:
                        sb.append(e); // \" \\ \/ \' and anything else taken literally
                }
            }
        }

        private Number number() {
            int start = pos;
            boolean decimal = false;
            if (s.charAt(pos) == '-' || s.charAt(pos) == '+') {
                pos++;
            }
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (c >= '0' && c <= '9') {
                    pos++;
                } else if (c == '.' || c == 'e' || c == 'E'
                    || ((c == '-' || c == '+') && (s.charAt(pos - 1) == 'e' || s.charAt(pos - 1) == 'E'))) {
                    decimal = true;
                    pos++;
                } else {
                    break;
                }
            }
            String text = s.substring(start, pos);
            if (pos < s.length() && "LSBFD".indexOf(s.charAt(pos)) >= 0) {
                pos++; // fastjson's type suffixes
            }
            if (text.startsWith("+")) {
                text = text.substring(1);
            }
            try {
                if (decimal) {
                    return new BigDecimal(text);
                }
                BigInteger big = new BigInteger(text);
                if (big.bitLength() < 32) {
                    return big.intValue();
                }
                if (big.bitLength() < 64) {
                    return big.longValue();
                }
                return big;
            } catch (NumberFormatException e) {
                pos = start;
                throw error("bad number '" + text + "'");
            }
        }
    }
}
