// Stand-in (ours) for fastjson's JSONArray: what a generic parse returns for a JSON array.
package com.alibaba.fastjson;

import java.util.ArrayList;
import java.util.List;

public class JSONArray extends ArrayList<Object> {
    public JSONArray() {
    }

    public JSONArray(List<Object> list) {
        super(list);
    }

    public JSONObject getJSONObject(int index) {
        Object v = get(index);
        return v instanceof JSONObject ? (JSONObject) v : null;
    }

    // used by acl/plain/PlainPermissionManager (globalWhiteRemoteAddresses); fastjson returns
    // the element's string form (null stays null)
    public String getString(int index) {
        Object v = get(index);
        return v == null ? null : (v instanceof String ? (String) v : JSON.toJSONString(v));
    }

    public <T> List<T> toJavaList(Class<T> clazz) {
        List<T> out = new ArrayList<T>();
        for (Object o : this) {
            out.add(JSON.convert(o, clazz));
        }
        return out;
    }

    public String toJSONString() {
        return JSON.toJSONString(this);
    }

    @Override
    public String toString() {
        return toJSONString();
    }
}
