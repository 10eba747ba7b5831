//! The semantic suite on the in-memory store.
idem_core::state_store_suite!(idem_core::MemoryStore::new());
