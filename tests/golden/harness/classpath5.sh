# Sourced by build5.sh and build5_store.sh: the classpath RocketMQ 5.x's store sources compile
# and run with (the jars build5.sh's header lists), and the JVM options to run them. Needs J
# (/usr/share/java) and M (the Maven repository) set; sets CP and JOPTS.
O=$M/io/opentelemetry
CP=""
for jar in netty-buffer netty-common netty-transport netty-handler netty-handler-proxy \
    netty-codec netty-codec-haproxy netty-resolver netty-transport-native-epoll \
    netty-transport-native-unix-common commons-validator lz4-java commons-lang3 guava \
    conversant-disruptor commons-collections3 jsr305; do
    CP="$CP:$J/$jar.jar"
done
CP="${CP#:}:$M/com/github/luben/zstd-jni/1.5.5-11/zstd-jni-1.5.5-11.jar"
CP="$CP:$M/net/java/dev/jna/jna/5.13.0/jna-5.13.0.jar"
CP="$CP:$M/org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"
CP="$CP:$M/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar"
CP="$CP:$M/commons-codec/commons-codec/1.16.0/commons-codec-1.16.0.jar"
for otel in api context common sdk-common sdk-metrics; do
    CP="$CP:$O/opentelemetry-$otel/1.62.0/opentelemetry-$otel-1.62.0.jar"
done

# Java 17 closes the JDK internals RocketMQ uses to unmap files.
JOPTS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED
       --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/java.nio=ALL-UNNAMED
       --add-opens java.base/sun.nio.ch=ALL-UNNAMED
       --add-opens java.base/java.lang=ALL-UNNAMED
       -Dorg.slf4j.simpleLogger.defaultLogLevel=error)
