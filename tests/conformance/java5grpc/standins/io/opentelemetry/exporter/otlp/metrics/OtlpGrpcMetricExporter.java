package io.opentelemetry.exporter.otlp.metrics;

import io.grpc.ManagedChannel;
import io.opentelemetry.sdk.metrics.export.MetricExporter;
import java.time.Duration;

/**
 * Stand-in for opentelemetry-exporter-otlp-metrics (not in Debian, not in ~/.m2), our own code:
 * the client builds one only when the server's settings turn metrics on, which rocketstore's
 * never do; building one fails loudly instead of exporting nothing.
 */
public abstract class OtlpGrpcMetricExporter implements MetricExporter {
    public static Builder builder() {
        return new Builder();
    }

    public static final class Builder {
        public Builder setChannel(ManagedChannel channel) {
            return this;
        }

        public Builder setTimeout(Duration timeout) {
            return this;
        }

        public OtlpGrpcMetricExporter build() {
            throw new UnsupportedOperationException("stand-in: no OTLP metric exporter in this build");
        }
    }
}
