"""Pure codecs: bytes <-> values. No I/O, no clock, no threads (layer above config/errors)."""
