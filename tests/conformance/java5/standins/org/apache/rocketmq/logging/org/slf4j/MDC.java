// Stand-in (ours) for RocketMQ's shaded slf4j MDC: forwards to plain slf4j.
package org.apache.rocketmq.logging.org.slf4j;

public final class MDC {
    private MDC() {
    }

    public static void put(String key, String value) {
        org.slf4j.MDC.put(key, value);
    }

    public static void clear() {
        org.slf4j.MDC.clear();
    }
}
