// Writes rocketmq-4.9.8/compressed-bodies.json: one body compressed by RocketMQ 4.9.8's own
// compressors (CompressorFactory: LZ4 through lz4-java's frame stream, ZSTD through
// zstd-jni's stream, ZLIB through java.util.zip) at the client's default level 5, with the
// sysFlag bits each compression type sets. Run with the classpath of
// tests/conformance/java/build.sh (RocketMQ 4.9.8's common module, lz4-java, zstd-jni):
//   javac -cp "$CP" CompressedBodies.java && java -cp "$CP:." CompressedBodies > out.json
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.compression.CompressorFactory;

public class CompressedBodies {
    public static void main(String[] args) throws Exception {
        StringBuilder plain = new StringBuilder();
        for (int i = 0; i < 300; i++) {
            plain.append("{\"order\": ").append(i).append(", \"note\": \"rocketmq body\"}\n");
        }
        byte[] body = plain.toString().getBytes(StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder("{\n  \"plainLength\": " + body.length + ",\n");
        out.append("  \"bodies\": [\n");
        CompressionType[] types = {CompressionType.LZ4, CompressionType.ZSTD, CompressionType.ZLIB};
        for (int t = 0; t < types.length; t++) {
            byte[] packed = CompressorFactory.getCompressor(types[t]).compress(body, 5);
            StringBuilder hex = new StringBuilder();
            for (byte b : packed) {
                hex.append(String.format("%02x", b));
            }
            out.append("    {\"type\": \"").append(types[t]).append("\", \"typeFlag\": ")
                .append(types[t].getCompressionFlag()).append(", \"hex\": \"").append(hex)
                .append("\"}").append(t + 1 < types.length ? ",\n" : "\n");
        }
        System.out.print(out.append("  ]\n}\n"));
    }
}
