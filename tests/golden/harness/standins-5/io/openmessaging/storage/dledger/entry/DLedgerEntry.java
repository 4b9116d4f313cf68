// Stand-in (ours): DLedger is off (enableDLegerCommitLog=false); only this constant is read.
package io.openmessaging.storage.dledger.entry;

public class DLedgerEntry {
    // Where a DLedger entry's body starts (its header and body length); read only with DLedger on.
    public static final int BODY_OFFSET = 48;
}
