//! The Raft groups of a node: the global group and one group per region (docs/design.md §3).
//!
//! Every node runs a replica of every group: the global group from the start, each region
//! group once the replicated configuration defines its region ([`provisioner`]). Each
//! group has its own RocksDB and log, and shares the node's Raft port and connections
//! with the others. The [`Router`] sends each API call to the group that decides its
//! tenant; the [`Steward`] keeps region groups' leaders in their home region and records
//! failovers.

mod backend;
mod configure;
mod forward;
mod group;
pub mod provisioner;
mod router;
mod set;
mod steward;
mod view;

pub use forward::ForwardService;
pub use group::{Group, GroupKit};
pub use router::Router;
pub use set::GroupSet;
pub use steward::Steward;
