// Stand-in (ours) for RocketMQ's shaded slf4j API: forwards every call to plain slf4j.
package org.apache.rocketmq.logging.org.slf4j;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;

public final class LoggerFactory {
    private LoggerFactory() {
    }

    public static Logger getLogger(String name) {
        org.slf4j.Logger target = org.slf4j.LoggerFactory.getLogger(name);
        return (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(),
            new Class<?>[] {Logger.class}, (proxy, method, args) -> {
                try {
                    return method.invoke(target, args);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            });
    }

    public static Logger getLogger(Class<?> clazz) {
        return getLogger(clazz.getName());
    }
}
