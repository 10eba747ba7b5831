//! Waiting for nodes: up (`/healthz`), and agreeing on a leader (`Admin.Status`).
//!
//! Faults are only meaningful against a cluster that was healthy first, and the final reads
//! only prove something once the cluster recovered: both waits are bounded and report which
//! node was not ready.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use idem_client::{Client, ClientOptions, RetryPolicy};

use super::netns::Topology;
use super::security::Access;
use crate::http;

/// A client for status queries to any node of `topology` (short timeouts, no retries),
/// presenting `access`.
pub fn admin_client(topology: &Topology, access: &Access) -> anyhow::Result<Client> {
    let options = access.apply(ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(1),
        retry: RetryPolicy::no_retry(),
        ..ClientOptions::default()
    });
    let endpoints = topology.ids().map(|i| topology.api_addr(i)).collect();
    Ok(Client::connect(endpoints, options)?)
}

/// True when node `id` answers `GET /healthz` with 200.
pub async fn healthy(topology: &Topology, id: usize) -> bool {
    matches!(
        http::request(
            &topology.http_addr(id),
            "GET",
            "/healthz",
            Duration::from_secs(1)
        )
        .await,
        Ok((200, _))
    )
}

/// Waits until every node in `ids` is healthy.
pub async fn wait_healthy(
    topology: &Topology,
    ids: &[usize],
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    for &id in ids {
        while !healthy(topology, id).await {
            if Instant::now() > deadline {
                bail!(
                    "node n{id} not healthy (GET http://{}/healthz) within {timeout:?}",
                    topology.http_addr(id)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// The leader that a majority of `ids` agree on, if any (nodes are asked in parallel, so a
/// paused node costs one timeout, not one per node).
pub async fn leader(client: &Client, topology: &Topology, ids: &[usize]) -> Option<usize> {
    let mut asks = tokio::task::JoinSet::new();
    for &id in ids {
        let (client, addr) = (client.clone(), topology.api_addr(id));
        asks.spawn(async move { client.status_of(&addr).await.ok()?.leader_id });
    }
    let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
    while let Some(answer) = asks.join_next().await {
        if let Ok(Some(l)) = answer {
            *votes.entry(l).or_default() += 1;
        }
    }
    let (&leader, &count) = votes.iter().max_by_key(|(_, c)| **c)?;
    (count * 2 > ids.len()).then_some(leader as usize)
}

/// Waits until a majority of `ids` agree on a leader that is itself in `ids`.
pub async fn wait_leader(
    client: &Client,
    topology: &Topology,
    ids: &[usize],
    timeout: Duration,
) -> anyhow::Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(l) = leader(client, topology, ids).await {
            if ids.contains(&l) {
                return Ok(l);
            }
        }
        if Instant::now() > deadline {
            bail!("no leader agreed on by a majority of {ids:?} within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
