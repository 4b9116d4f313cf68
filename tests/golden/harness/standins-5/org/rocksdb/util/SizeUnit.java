// Stand-in (ours): byte-size constants MessageStoreConfig uses for RocksDB defaults.
package org.rocksdb.util;

public final class SizeUnit {
    public static final long KB = 1024L;
    public static final long MB = KB * KB;
    public static final long GB = KB * MB;

    private SizeUnit() {
    }
}
