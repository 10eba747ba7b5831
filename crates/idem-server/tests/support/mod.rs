//! What the in-process node and cluster tests share: loopback members, node configurations,
//! a credentials file with one principal per role, and calls made with a bearer token.
//!
//! Each test module uses only part of it.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use idem_proto::status;
use idem_proto::v1 as pb;
use idem_server::auth::{token_digest, AuthMode};
use idem_server::config::AuthConfig;
use idem_server::{ClusterConfig, Config, InitialMember, Node, NodeHandle};
use openraft::async_runtime::WatchReceiver;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

/// A worker of tenant `acme` (credentials file).
pub const ACME_WORKER: &str = "idem_acme_worker_token";
/// A worker of tenant `globex` (credentials file).
pub const GLOBEX_WORKER: &str = "idem_globex_worker_token";
/// An operator of tenant `acme` (credentials file).
pub const OPERATOR: &str = "idem_acme_operator_token";
/// An admin of tenant `acme` only (credentials file).
pub const ACME_ADMIN: &str = "idem_acme_admin_token";
/// An admin of every tenant, named `root` (credentials file).
pub const ADMIN: &str = "idem_admin_token";

/// A loopback address whose port was free a moment ago.
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Member `id` at fresh loopback addresses, in region `r<id>`.
pub fn member(id: u64) -> InitialMember {
    InitialMember {
        id,
        raft_addr: free_addr(),
        api_addr: free_addr(),
        region: Some(format!("r{id}")),
        zone: Some(format!("r{id}-a")),
    }
}

/// Writes the credentials file of the five principals above into `dir`.
pub fn credentials(dir: &Path) -> PathBuf {
    let entry = |name: &str, token: &str, role: &str, tenants: &str| {
        format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{}\"\nrole = \"{role}\"\ntenants = [{tenants}]\n\n",
            token_digest(token)
        )
    };
    let text = [
        entry("acme-worker", ACME_WORKER, "worker", "\"acme\""),
        entry("globex-worker", GLOBEX_WORKER, "worker", "\"globex\""),
        entry("acme-operator", OPERATOR, "operator", "\"acme\""),
        entry("acme-admin", ACME_ADMIN, "admin", "\"acme\""),
        entry("root", ADMIN, "admin", "\"*\""),
    ]
    .concat();
    let path = dir.join("credentials.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Authentication on, with the credentials file of [`credentials`] in `dir`.
pub fn auth_on(dir: &Path) -> AuthConfig {
    AuthConfig {
        mode: AuthMode::On,
        credentials: Some(credentials(dir)),
    }
}

/// The configuration of `me` (data under `data_dir`), with fast Raft timers.
pub fn node_config(
    data_dir: PathBuf,
    me: &InitialMember,
    cluster: ClusterConfig,
    auth: AuthConfig,
) -> Config {
    let region = me.region.clone().unwrap_or_else(|| "local".into());
    let mut config = Config {
        node_id: me.id,
        data_dir,
        api_addr: me.api_addr,
        raft_addr: me.raft_addr,
        http_addr: "127.0.0.1:0".parse().unwrap(),
        zone: me.zone.clone().unwrap_or_else(|| format!("{region}-a")),
        region,
        write_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(2),
        cluster,
        auth,
        ..Config::default()
    };
    config.raft.heartbeat_interval = Duration::from_millis(100);
    config.raft.election_timeout = Duration::from_millis(500);
    config
}

/// The configuration of a node alone (id 1, data under `dir/data`, ports picked at start),
/// with faster Raft timers than a cluster's: a single voter only has to elect itself.
pub fn single_config(dir: &Path, auth: AuthConfig) -> Config {
    let any = "127.0.0.1:0".parse().unwrap();
    let me = InitialMember {
        id: 1,
        raft_addr: any,
        api_addr: any,
        region: None,
        zone: None,
    };
    let mut config = node_config(dir.join("data"), &me, ClusterConfig::default(), auth);
    config.raft.heartbeat_interval = Duration::from_millis(50);
    config.raft.election_timeout = Duration::from_millis(300);
    config
}

/// Starts `me` with an empty data directory `data_dir`, to join a running cluster (as
/// `idemd --join`); it is ready only once a member adds it.
pub async fn start_joining(data_dir: PathBuf, me: &InitialMember) -> NodeHandle {
    let joining = ClusterConfig {
        initial_members: Vec::new(),
        join: true,
    };
    let config = node_config(data_dir, me, joining, AuthConfig::off());
    Node::start(config).await.expect("joining node starts")
}

/// The `AddMember` request that adds `me` as a learner, in its region and zone.
pub fn add_request(me: &InitialMember) -> pb::AddMemberRequest {
    pb::AddMemberRequest {
        member: Some(pb::Member {
            id: me.id,
            raft_addr: me.raft_addr.to_string(),
            api_addr: me.api_addr.to_string(),
            region: me.region.clone().unwrap_or_default(),
            zone: me.zone.clone().unwrap_or_default(),
            ..Default::default()
        }),
    }
}

/// Starts the node of `config` and waits until it is ready.
pub async fn start(config: Config) -> NodeHandle {
    let node = Node::start(config).await.expect("node starts");
    node.wait_ready(Duration::from_secs(10)).await.unwrap();
    node
}

/// A node alone with authentication on and the credentials of [`credentials`], started.
pub async fn secured_node(dir: &Path) -> NodeHandle {
    start(single_config(dir, auth_on(dir))).await
}

/// Starts three initial members (data under `dir/n<id>`) and waits until each is ready.
pub async fn three_nodes(dir: &Path, auth: AuthConfig) -> Vec<NodeHandle> {
    let members: Vec<InitialMember> = (1..=3).map(member).collect();
    let cluster = ClusterConfig {
        initial_members: members.clone(),
        join: false,
    };
    let configs = members.iter().map(|m| {
        let data_dir = dir.join(format!("n{}", m.id));
        node_config(data_dir, m, cluster.clone(), auth.clone())
    });
    start_all(configs).await
}

/// Starts the nodes of `configs` at once and waits until each is ready.
pub async fn start_all(configs: impl IntoIterator<Item = Config>) -> Vec<NodeHandle> {
    let starts = configs.into_iter().map(Node::start);
    let nodes: Vec<NodeHandle> = futures::future::join_all(starts)
        .await
        .into_iter()
        .map(|n| n.expect("node starts"))
        .collect();
    for node in &nodes {
        node.wait_ready(Duration::from_secs(20)).await.unwrap();
    }
    nodes
}

/// (leader, followers) as indexes into `nodes`, as node 0 sees it.
pub fn roles(nodes: &[NodeHandle]) -> (usize, Vec<usize>) {
    let leader = nodes[0]
        .raft()
        .metrics()
        .borrow_watched()
        .current_leader
        .unwrap();
    let l = nodes.iter().position(|n| n.node_id() == leader).unwrap();
    (l, (0..nodes.len()).filter(|i| *i != l).collect())
}

/// A plaintext channel to `addr`.
pub async fn connect(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A channel to `node`'s API port.
pub async fn channel(node: &NodeHandle) -> Channel {
    connect(node.api_addr()).await
}

/// `message` with `authorization: Bearer <token>` when a token is given.
pub fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = MetadataValue::try_from(format!("Bearer {token}")).unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Asserts that `status` has `code` and the idem reason `expected`.
pub fn refused(status: &tonic::Status, code: Code, expected: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    assert_eq!(
        status::reason_of(status).as_deref(),
        Some(expected),
        "{status:?}"
    );
}

/// Shuts every node down.
pub async fn shutdown(nodes: Vec<NodeHandle>) {
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// Asserts that a record restored from a backup kept the fence it was acknowledged with
/// and, when its completion was acknowledged, the tests' result (201, `ch_1`).
pub fn assert_restored(record: &idem_proto::v1::Record, fence: u64, completed: bool, what: &str) {
    assert_eq!(record.fence, fence, "{what}");
    if completed {
        assert_eq!(record.state(), idem_proto::v1::State::Completed, "{what}");
        let result = record.result.as_ref().unwrap();
        assert_eq!(
            (result.status_code, result.resource_id.as_str()),
            (201, "ch_1"),
            "{what}"
        );
    }
}
