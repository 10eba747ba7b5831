//! Who plays which part, chosen from the region placement and the global leader.
//!
//! The figures compare request paths, so each part is chosen to make its path the one the
//! design talks about: the client sits in a region *without* the global leader (in global
//! mode its claims then cross regions to be decided), that region is the bound tenant's home
//! (in affinity mode the same claims stay in the region), retries are asked of a node of
//! another region (a replica, far from the tenant's leader), and the isolation cuts off the
//! home region while the global leader's region observes from the majority side.

use serde::Serialize;

use crate::cluster::regions::Regions;

/// The parts of the scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Roles {
    /// The node leading the global group when the scenario starts.
    pub global_leader: usize,
    /// Its region (0-based).
    #[serde(skip)]
    pub leader_region: usize,
    /// The client's region (0-based): no global leader there; the bound tenant's home.
    #[serde(skip)]
    pub home: usize,
    /// The client's region by name.
    pub home_region: String,
    /// The node of the home region the client sends to.
    pub client_node: usize,
    /// Another region (0-based), whose node answers retries from its replica.
    #[serde(skip)]
    pub replica: usize,
    /// That region by name.
    pub replica_region: String,
    /// The node of that region the retries go to.
    pub replica_node: usize,
    /// A node outside the home region, which watches the groups during the isolation.
    pub observer_node: usize,
    /// One node per region, in region order: the clients of the concurrent claims.
    pub race_nodes: Vec<usize>,
    /// The home region's nodes, cut off by the isolation.
    pub cut_off_nodes: Vec<usize>,
    /// The tenant bound to the home region.
    pub bound_tenant: String,
    /// A tenant without a home, decided by the global group.
    pub global_tenant: String,
}

impl Roles {
    /// The parts for `regions` when node `global_leader` leads the global group.
    pub fn choose(regions: &Regions, global_leader: usize) -> Roles {
        let leader_region = regions.region_of(global_leader);
        let populated: Vec<usize> = (0..regions.count())
            .filter(|&r| !regions.nodes_in(r).is_empty())
            .collect();
        let home = populated
            .iter()
            .copied()
            .find(|&r| r != leader_region)
            .unwrap_or(leader_region);
        let replica = populated
            .iter()
            .copied()
            .find(|&r| r != home)
            .unwrap_or(home);
        let first = |r: usize| regions.nodes_in(r)[0];
        let home_region = Regions::name(home);
        Roles {
            global_leader,
            leader_region,
            home,
            client_node: first(home),
            replica,
            replica_region: Regions::name(replica),
            replica_node: first(replica),
            observer_node: global_leader,
            race_nodes: populated.iter().map(|&r| first(r)).collect(),
            cut_off_nodes: regions.nodes_in(home),
            bound_tenant: format!("acme-{home_region}"),
            home_region,
            global_tenant: "globex".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_lives_where_the_global_leader_does_not() {
        let regions = Regions::new(5, 3, &[]).unwrap();
        let roles = Roles::choose(&regions, 1);
        assert_eq!((roles.home_region.as_str(), roles.client_node), ("r2", 2));
        assert_eq!(
            (roles.replica_region.as_str(), roles.replica_node),
            ("r1", 1)
        );
        assert_eq!(roles.cut_off_nodes, [2, 5]);
        assert_eq!(roles.race_nodes, [1, 2, 3]);
        assert_eq!(roles.observer_node, 1);
        assert_eq!(roles.bound_tenant, "acme-r2");

        let roles = Roles::choose(&regions, 5);
        assert_eq!((roles.home, roles.client_node, roles.replica), (0, 1, 1));
        assert_eq!(roles.cut_off_nodes, [1, 4]);
        assert!(!roles.cut_off_nodes.contains(&roles.observer_node));

        let roles = Roles::choose(&regions, 3);
        assert_eq!((roles.home, roles.leader_region), (0, 2));
    }
}
