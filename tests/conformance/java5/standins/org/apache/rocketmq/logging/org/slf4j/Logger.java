// Stand-in (ours) for RocketMQ's shaded slf4j API: the plain slf4j Logger under that name.
package org.apache.rocketmq.logging.org.slf4j;

public interface Logger extends org.slf4j.Logger {
}
