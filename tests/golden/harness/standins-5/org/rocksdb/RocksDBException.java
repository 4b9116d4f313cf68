// Stand-in (ours): RocksDB is off here (default store type); only signatures mention it.
package org.rocksdb;

public class RocksDBException extends Exception {
    public RocksDBException(String message) {
        super(message);
    }
}
