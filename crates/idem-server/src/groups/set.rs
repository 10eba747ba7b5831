//! The groups a node runs, shared by the router, the Raft port and the background tasks.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use idem_core::placement::{GroupId, GLOBAL_GROUP};

use super::group::Group;

/// The groups by id. Groups are added while the node runs (regions are never removed) and
/// all stop with the node. Registering a group here also serves its Raft RPCs.
#[derive(Clone)]
pub struct GroupSet {
    groups: Arc<RwLock<BTreeMap<GroupId, Arc<Group>>>>,
    registry: idem_raft::GroupRegistry,
}

impl GroupSet {
    /// A set holding the global group.
    pub fn new(global: Group) -> Self {
        let set = GroupSet {
            groups: Arc::default(),
            registry: idem_raft::GroupRegistry::new(),
        };
        set.insert(global);
        set
    }

    /// Adds a group and serves its Raft RPCs.
    pub fn insert(&self, group: Group) -> Arc<Group> {
        let group = Arc::new(group);
        self.registry.insert(group.id(), group.raft().clone());
        self.write().insert(group.id(), Arc::clone(&group));
        group
    }

    /// The group `id`, if this node runs it.
    pub fn get(&self, id: GroupId) -> Option<Arc<Group>> {
        self.read().get(&id).cloned()
    }

    /// The global group (always present).
    pub fn global(&self) -> Arc<Group> {
        self.get(GLOBAL_GROUP)
            .unwrap_or_else(|| unreachable!("the global group is inserted at construction"))
    }

    /// Every group, by id.
    pub fn all(&self) -> Vec<Arc<Group>> {
        self.read().values().cloned().collect()
    }

    /// The registry the Raft port serves.
    pub fn registry(&self) -> &idem_raft::GroupRegistry {
        &self.registry
    }

    /// Stops serving every group's Raft RPCs (before shutting the groups down).
    pub fn unregister_all(&self) {
        for id in self.registry.groups() {
            self.registry.remove(id);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<GroupId, Arc<Group>>> {
        self.groups.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<GroupId, Arc<Group>>> {
        self.groups.write().unwrap_or_else(|e| e.into_inner())
    }
}
