// Stand-in (ours): MessageStoreConfig names a RocksDB compression type by default.
package org.rocksdb;

public enum CompressionType {
    LZ4_COMPRESSION("lz4"), ZSTD_COMPRESSION("zstd");

    private final String libraryName;

    CompressionType(String libraryName) {
        this.libraryName = libraryName;
    }

    public String getLibraryName() {
        return libraryName;
    }
}
