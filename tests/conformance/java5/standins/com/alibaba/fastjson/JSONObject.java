// Stand-in (ours) for fastjson's JSONObject: what a generic parse returns for a JSON object.
// Keys are normally Strings; fastjson's non-string keys ({0:..}, {{..}:..}) are kept as the
// parsed key object (Number / JSONObject), as fastjson's own generic parse does.
package com.alibaba.fastjson;

import java.util.LinkedHashMap;
import java.util.Map;

public class JSONObject extends LinkedHashMap<String, Object> {
    public JSONObject() {
    }

    public JSONObject(Map<String, Object> map) {
        super(map);
    }

    public String getString(String key) {
        Object v = get(key);
        return v == null ? null : (v instanceof String ? (String) v : JSON.toJSONString(v));
    }

    public Integer getInteger(String key) {
        return JSON.convert(get(key), Integer.class);
    }

    public Long getLong(String key) {
        return JSON.convert(get(key), Long.class);
    }

    public Boolean getBoolean(String key) {
        return JSON.convert(get(key), Boolean.class);
    }

    public JSONObject getJSONObject(String key) {
        Object v = get(key);
        return v instanceof JSONObject ? (JSONObject) v : (v == null ? null : JSON.parseObject(JSON.toJSONString(v)));
    }

    public JSONArray getJSONArray(String key) {
        Object v = get(key);
        return v instanceof JSONArray ? (JSONArray) v : (v == null ? null : JSON.parseArray(JSON.toJSONString(v)));
    }

    public <T> T toJavaObject(Class<T> clazz) {
        return JSON.convert(this, clazz);
    }

    public String toJSONString() {
        return JSON.toJSONString(this);
    }

    @Override
    public String toString() {
        return toJSONString();
    }
}
