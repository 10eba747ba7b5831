//! Clock skew: some nodes' realtime clocks moved ahead or behind.
//!
//! Lease expiry is decided on the leader's stamps (`max(stamp, last stamp)` in apply), so a
//! leader whose clock runs ahead expires leases early and lets a second worker take over
//! while the first is still working: fences must then stop the first worker's writes. A
//! leader whose clock runs behind stalls replicated time (leases last longer), which must not
//! break anything either. Nodes must have been started under libfaketime
//! ([`crate::cluster::clock`]).

use anyhow::Context as _;

use crate::cluster::Cluster;
use idem_testkit::Rng;

/// Draws offsets for a random non-empty subset of `nodes`, each within ±`max_ms`.
pub fn draw_skews(rng: &mut Rng, nodes: &[usize], max_ms: u64) -> Vec<(usize, i64)> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let count = rng.between(1, nodes.len() as u64) as usize;
    let mut chosen = rng.shuffled(nodes)[..count].to_vec();
    chosen.sort();
    chosen
        .into_iter()
        .map(|n| {
            let magnitude = rng.between(max_ms / 4, max_ms) as i64;
            let sign = if rng.chance(0.5) { 1 } else { -1 };
            (n, sign * magnitude)
        })
        .collect()
}

/// Applies `skews` (node, offset in ms).
pub fn skew(cluster: &Cluster, skews: &[(usize, i64)]) -> anyhow::Result<()> {
    for &(id, ms) in skews {
        let node = cluster.node(id);
        let clock = node
            .clock()
            .context("clock nemesis: node was not started under libfaketime")?;
        clock.set_offset_ms(ms)?;
    }
    Ok(())
}

/// Puts the clocks of `nodes` back to the true time.
pub fn reset(cluster: &Cluster, nodes: &[usize]) -> anyhow::Result<()> {
    for &id in nodes {
        if let Some(clock) = cluster.node(id).clock() {
            clock.set_offset_ms(0)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skews_are_bounded_and_deterministic() {
        let a = draw_skews(&mut Rng::new(5), &[1, 2, 3], 8000);
        let b = draw_skews(&mut Rng::new(5), &[1, 2, 3], 8000);
        assert_eq!(a, b);
        assert!(!a.is_empty());
        for (n, ms) in a {
            assert!((1..=3).contains(&n));
            assert!((2000..=8000).contains(&ms.abs()));
        }
        assert!(draw_skews(&mut Rng::new(1), &[], 10).is_empty());
    }
}
