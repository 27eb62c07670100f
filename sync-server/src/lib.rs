//! memoria-sync-server: validates and compare-and-swaps; it never merges.
