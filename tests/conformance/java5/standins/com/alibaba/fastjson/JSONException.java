// Stand-in (ours) for fastjson's JSONException.
package com.alibaba.fastjson;

public class JSONException extends RuntimeException {
    public JSONException(String message) {
        super(message);
    }

    public JSONException(String message, Throwable cause) {
        super(message, cause);
    }
}
