//! Multi-region behaviour of the SDK against tiny in-process nodes (the `Idempotency` rpcs
//! through `support::fake`, `Admin` through idem-proto's fake admin): per-tenant routes to the
//! leader of each tenant's group,
//! the region preference for new tenants, `REGION_FAILOVER` returned at once with its
//! retry-after, `WRONG_GROUP` retried, and the typed admin calls for regions and failover.

use crate::support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_client::convert::record_to_proto;
use idem_client::Client;
use idem_core::placement::Mode;
use idem_proto::testing::{admin, sample, AdminFake, FakeAdmin};
use idem_proto::{reason, status, v1};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

use support::fake::{self, Fake};
use support::{claim, dead_addr, listener, options, record, target, target_of};

/// A failure a node answers before anything else.
#[derive(Clone, Debug)]
enum Fault {
    RegionFailover,
    WrongGroup,
}

/// How a node answers a call for a tenant whose group it does not lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotLeading {
    /// Serves it through the leader and names the leader in `leader-addr`.
    Forward,
    /// Answers NOT_LEADER with the leader's address.
    Redirect,
}

/// What every node shares besides its admin state: who leads each tenant's group.
#[derive(Default)]
struct Cluster {
    /// Tenant -> API address of the leader of its group (absent: any node serves it).
    leaders: Mutex<HashMap<String, String>>,
}

impl Cluster {
    fn lead(&self, tenant: &str, addr: &str) {
        self.leaders
            .lock()
            .unwrap()
            .insert(tenant.into(), addr.into());
    }
}

struct NodeState {
    addr: String,
    /// The Admin rpcs (configuration, groups and membership shared with the other nodes).
    admin: FakeAdmin,
    cluster: Arc<Cluster>,
    not_leading: NotLeading,
    faults: Mutex<VecDeque<Fault>>,
    /// (method, tenant) of every call this node served itself.
    served: Mutex<Vec<(&'static str, String)>>,
    /// (method, tenant) of every call this node forwarded or redirected.
    passed_on: Mutex<Vec<(&'static str, String)>>,
}

#[derive(Clone)]
struct Node(Arc<NodeState>);

impl Node {
    fn served(&self) -> Vec<(&'static str, String)> {
        self.0.served.lock().unwrap().clone()
    }

    fn passed_on(&self) -> usize {
        self.0.passed_on.lock().unwrap().len()
    }

    fn claims(&self) -> usize {
        let served = self.0.served.lock().unwrap();
        let passed = self.0.passed_on.lock().unwrap();
        served
            .iter()
            .chain(passed.iter())
            .filter(|(m, _)| *m == "claim")
            .count()
    }

    fn fail_with(&self, faults: impl IntoIterator<Item = Fault>) {
        self.0.faults.lock().unwrap().extend(faults);
    }

    fn status_calls(&self) -> usize {
        let requests = self.0.admin.requests();
        requests
            .iter()
            .filter(|r| r.starts_with("StatusRequest"))
            .count()
    }

    /// Answers a call about `tenant`: `Ok(None)` served here, `Ok(Some(leader))` served
    /// through the leader, or the fault / NOT_LEADER.
    fn route(&self, method: &'static str, tenant: &str) -> Result<Option<String>, Status> {
        if let Some(fault) = self.0.faults.lock().unwrap().pop_front() {
            return Err(match fault {
                Fault::RegionFailover => status::with_retry_after(
                    reason::REGION_FAILOVER,
                    "region failover: HIGH-risk claims are refused",
                    Duration::from_millis(2000),
                ),
                Fault::WrongGroup => status::error(reason::WRONG_GROUP, "route again", []),
            });
        }
        let leader = self.0.cluster.leaders.lock().unwrap().get(tenant).cloned();
        match leader {
            Some(leader) if leader != self.0.addr => {
                self.0
                    .passed_on
                    .lock()
                    .unwrap()
                    .push((method, tenant.to_owned()));
                match self.0.not_leading {
                    NotLeading::Forward => Ok(Some(leader)),
                    NotLeading::Redirect => Err(status::not_leader(Some(9), Some(&leader))),
                }
            }
            _ => {
                self.0
                    .served
                    .lock()
                    .unwrap()
                    .push((method, tenant.to_owned()));
                Ok(None)
            }
        }
    }

    fn answer<T>(
        &self,
        method: &'static str,
        tenant: &str,
        body: T,
    ) -> Result<Response<T>, Status> {
        let leader = self.route(method, tenant)?;
        let mut response = Response::new(body);
        if let Some(leader) = leader {
            response
                .metadata_mut()
                .insert(reason::LEADER_ADDR_METADATA_KEY, leader.parse().unwrap());
        }
        Ok(response)
    }
}

fn tenant_of(scope: &Option<v1::Scope>) -> String {
    scope.as_ref().map(|s| s.tenant.clone()).unwrap_or_default()
}

impl Fake for Node {
    async fn claim(
        &self,
        request: Request<v1::ClaimRequest>,
    ) -> Result<Response<v1::ClaimResponse>, Status> {
        let tenant = tenant_of(&request.get_ref().scope);
        let body = support::acquired();
        self.answer("claim", &tenant, body)
    }

    async fn start(
        &self,
        request: Request<v1::StartRequest>,
    ) -> Result<Response<v1::RecordResponse>, Status> {
        let wire = request.into_inner();
        let tenant = tenant_of(&wire.scope);
        let target = target_of(wire.scope, wire.key);
        let body = v1::RecordResponse {
            record: Some(record_to_proto(&record(&target, wire.fence))),
        };
        self.answer("start", &tenant, body)
    }

    async fn get(
        &self,
        request: Request<v1::GetRequest>,
    ) -> Result<Response<v1::GetResponse>, Status> {
        let wire = request.into_inner();
        let tenant = tenant_of(&wire.scope);
        let target = target_of(wire.scope, wire.key);
        let body = v1::GetResponse {
            record: Some(record_to_proto(&record(&target, 1))),
            outcome: v1::ClaimOutcome::InProgress as i32,
        };
        self.answer("get", &tenant, body)
    }

    async fn wait(
        &self,
        request: Request<v1::WaitRequest>,
    ) -> Result<Response<v1::WaitResponse>, Status> {
        let wire = request.into_inner();
        let tenant = tenant_of(&wire.scope);
        let target = target_of(wire.scope, wire.key);
        let body = v1::WaitResponse {
            record: Some(record_to_proto(&record(&target, 1))),
            outcome: v1::ClaimOutcome::InProgress as i32,
            terminal: false,
        };
        self.answer("wait", &tenant, body)
    }
}

impl AdminFake for Node {
    fn admin(&self) -> &FakeAdmin {
        &self.0.admin
    }

    /// Routed like the tenant's other calls.
    fn purge_subject(
        &self,
        request: Request<v1::PurgeSubjectRequest>,
    ) -> impl Future<Output = Result<Response<v1::PurgeSubjectResponse>, Status>> + Send {
        let tenant = request.get_ref().tenant.clone();
        let body = v1::PurgeSubjectResponse {
            records_scrubbed: 3,
        };
        std::future::ready(self.answer("purge", &tenant, body))
    }
}

/// Starts `n` nodes in `regions[i]` (ids 1, 2, ...), sharing one cluster view; all in the
/// membership.
async fn nodes(regions: &[&str], not_leading: NotLeading) -> (Arc<Cluster>, Vec<(Node, String)>) {
    let cluster = Arc::new(Cluster::default());
    let first = FakeAdmin::new(1, regions[0]);
    let mut started = Vec::new();
    for (id, region) in (1..).zip(regions) {
        let (listener, addr) = listener().await;
        let admin = first.peer(id, region);
        admin.edit_members(|m| m.push(sample::member(id, region, &addr)));
        let node = Node(Arc::new(NodeState {
            addr: addr.clone(),
            admin,
            cluster: Arc::clone(&cluster),
            not_leading,
            faults: Mutex::new(VecDeque::new()),
            served: Mutex::new(Vec::new()),
            passed_on: Mutex::new(Vec::new()),
        }));
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(fake::service(node.clone()))
                .add_service(admin::service(node.clone()))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        started.push((node, addr));
    }
    (cluster, started)
}

fn http(addr: &str) -> String {
    format!("http://{addr}")
}

/// Every call type that names a tenant, once for `tenant`.
async fn every_tenant_call(client: &Client, tenant: &str) {
    client.claim(claim(tenant)).await.unwrap();
    client.start(&target(tenant), 1).await.unwrap();
    client.get(&target(tenant)).await.unwrap();
    client
        .wait(&target(tenant), Duration::from_millis(10))
        .await
        .unwrap();
    client
        .purge_subject(tenant, "user-42", "GDPR-1", "ops")
        .await
        .unwrap();
}

#[tokio::test]
async fn each_tenant_goes_straight_to_the_leader_of_its_group() {
    let (cluster, nodes) = nodes(&["eu-west", "us-east", "ap-south"], NotLeading::Forward).await;
    let [(a, a_addr), (b, b_addr), (c, c_addr)] = <[_; 3]>::try_from(nodes).ok().unwrap();
    cluster.lead("acme", &b_addr);
    cluster.lead("globex", &c_addr);
    let client = Client::connect(vec![a_addr.clone()], options(3)).unwrap();

    // First calls: a forwards and names each tenant's leader.
    client.claim(claim("acme")).await.unwrap();
    assert_eq!(client.tenant_endpoint("acme"), Some(http(&b_addr)));
    client.claim(claim("globex")).await.unwrap();
    assert_eq!(client.tenant_endpoint("globex"), Some(http(&c_addr)));
    let forwarded = a.passed_on() + b.passed_on() + c.passed_on();
    assert_eq!(forwarded, 2, "one forwarded call per tenant");

    // Every later call of each tenant goes to its own leader, interleaved.
    for _ in 0..2 {
        every_tenant_call(&client, "acme").await;
        every_tenant_call(&client, "globex").await;
    }
    assert_eq!(a.passed_on() + b.passed_on() + c.passed_on(), forwarded);
    assert!(b.served().iter().all(|(_, t)| t == "acme"));
    assert!(c.served().iter().all(|(_, t)| t == "globex"));
    assert_eq!(b.served().len(), 2 * 5);
    assert_eq!(c.served().len(), 2 * 5);
    assert!(a.served().is_empty());
    // The learned leaders joined the endpoint set.
    assert_eq!(client.endpoints().len(), 3);
}

#[tokio::test]
async fn not_leader_hints_are_remembered_per_tenant() {
    let (cluster, nodes) = nodes(&["r1", "r2", "r3"], NotLeading::Redirect).await;
    let [(a, a_addr), (b, b_addr), (c, c_addr)] = <[_; 3]>::try_from(nodes).ok().unwrap();
    cluster.lead("acme", &b_addr);
    cluster.lead("globex", &c_addr);
    cluster.lead("initech", &a_addr);
    let client = Client::connect(vec![a_addr.clone()], options(4)).unwrap();

    client.claim(claim("acme")).await.unwrap();
    client.claim(claim("globex")).await.unwrap();
    client.claim(claim("initech")).await.unwrap();
    assert_eq!(client.tenant_endpoint("acme"), Some(http(&b_addr)));
    assert_eq!(client.tenant_endpoint("globex"), Some(http(&c_addr)));
    assert_eq!(client.tenant_endpoint("initech"), Some(http(&a_addr)));
    let redirects = a.passed_on() + b.passed_on() + c.passed_on();

    for tenant in ["acme", "globex", "initech", "acme"] {
        client.start(&target(tenant), 1).await.unwrap();
        client.get(&target(tenant)).await.unwrap();
    }
    assert_eq!(a.passed_on() + b.passed_on() + c.passed_on(), redirects);
    assert_eq!(b.served().len(), 1 + 4);
    assert_eq!(c.served().len(), 1 + 2);
    assert_eq!(a.served().len(), 1 + 2);
}

#[tokio::test]
async fn a_moved_tenant_is_routed_again_after_wrong_group() {
    let (cluster, nodes) = nodes(&["r1", "r2", "r3"], NotLeading::Forward).await;
    let [(_a, a_addr), (b, b_addr), (c, c_addr)] = <[_; 3]>::try_from(nodes).ok().unwrap();
    cluster.lead("acme", &b_addr);
    let client = Client::connect(vec![a_addr], options(4)).unwrap();
    client.claim(claim("acme")).await.unwrap();
    assert_eq!(client.tenant_endpoint("acme"), Some(http(&b_addr)));

    // acme's home moves to c; b's stale view answers WRONG_GROUP once.
    cluster.lead("acme", &c_addr);
    b.fail_with([Fault::WrongGroup]);
    client.start(&target("acme"), 1).await.unwrap();
    assert_eq!(client.tenant_endpoint("acme"), Some(http(&c_addr)));
    client.start(&target("acme"), 1).await.unwrap();
    assert_eq!(c.served().len(), 1, "the second start went to c directly");
}

#[tokio::test]
async fn wrong_group_is_retried_with_the_same_request_then_reported() {
    let (_, nodes) = nodes(&["r1"], NotLeading::Forward).await;
    let (node, addr) = nodes.into_iter().next().unwrap();
    let client = Client::connect(vec![addr], options(3)).unwrap();

    node.fail_with([Fault::WrongGroup, Fault::WrongGroup]);
    let claimed = client.claim(claim("acme")).await.unwrap();
    assert_eq!(claimed.fence(), Some(1));
    assert_eq!(node.claims(), 1, "the refused attempts reached no handler");

    // Every attempt refused: the refusal itself, not an unknown outcome.
    node.fail_with(vec![Fault::WrongGroup; 3]);
    let err = client.claim(claim("acme")).await.unwrap_err();
    assert_eq!(err.reason(), "WRONG_GROUP");
    assert!(!err.is_outcome_unknown());
    assert!(node.0.faults.lock().unwrap().is_empty(), "three attempts");
}

#[tokio::test]
async fn region_failover_is_returned_at_once_with_its_retry_after() {
    let (_, nodes) = nodes(&["r1", "r2"], NotLeading::Forward).await;
    let [(a, a_addr), (b, b_addr)] = <[_; 2]>::try_from(nodes).ok().unwrap();
    let client = Client::connect(vec![a_addr, b_addr], options(5)).unwrap();

    a.fail_with([Fault::RegionFailover]);
    let err = client
        .claim(claim("acme").risk(idem_core::Risk::High))
        .await
        .unwrap_err();
    assert!(err.is_region_failover(), "{err:?}");
    assert_eq!(err.reason(), "REGION_FAILOVER");
    assert_eq!(err.retry_after(), Some(Duration::from_millis(2000)));
    assert!(!err.is_outcome_unknown());
    // Not retried, here or elsewhere.
    assert_eq!(a.claims() + b.claims(), 0);
    assert!(a.0.faults.lock().unwrap().is_empty());
    assert!(b.served().is_empty());

    // Worker commands too (the server decides which calls it refuses).
    a.fail_with([Fault::RegionFailover]);
    let err = client.start(&target("acme"), 1).await.unwrap_err();
    assert!(err.is_region_failover());
    assert!(b.served().is_empty());
}

#[tokio::test]
async fn a_new_tenant_starts_in_the_client_region() {
    let (cluster, nodes) = nodes(&["eu-west", "us-east", "ap-south"], NotLeading::Forward).await;
    let [(a, a_addr), (b, b_addr), (c, c_addr)] = <[_; 3]>::try_from(nodes).ok().unwrap();
    // acme is homed in us-east (b leads its group); globex in ap-south (c).
    cluster.lead("acme", &b_addr);
    cluster.lead("globex", &c_addr);
    let endpoints = vec![a_addr.clone(), b_addr.clone(), c_addr.clone()];
    let client = Client::connect(endpoints, options(3).region("us-east")).unwrap();

    client.claim(claim("acme")).await.unwrap();
    assert_eq!(
        a.claims(),
        0,
        "the first attempt went to the client's region"
    );
    assert_eq!(b.served(), [("claim", "acme".to_owned())]);
    assert_eq!(client.tenant_endpoint("acme"), Some(http(&b_addr)));

    // A tenant homed elsewhere: first attempt in us-east, forwarded, then straight to c.
    client.claim(claim("globex")).await.unwrap();
    assert_eq!(b.passed_on(), 1);
    client.start(&target("globex"), 1).await.unwrap();
    assert_eq!(c.served(), [("start", "globex".to_owned())]);
    assert_eq!(b.passed_on(), 1);
    assert_eq!(a.claims(), 0);

    // The regions were asked once, from one node.
    client.claim(claim("initech")).await.unwrap();
    let asked: usize = [&a, &b, &c].iter().map(|n| n.status_calls()).sum();
    assert!((1..=3).contains(&asked), "{asked}");
    let regions: BTreeMap<String, String> = client.endpoint_regions().into_iter().collect();
    assert_eq!(
        regions.get(&http(&b_addr)).map(String::as_str),
        Some("us-east")
    );
    assert_eq!(regions.len(), 3);
    // initech has no home: b served it and is its route now.
    assert_eq!(client.tenant_endpoint("initech"), Some(http(&b_addr)));
}

#[tokio::test]
async fn members_of_the_client_region_are_learned_from_one_endpoint() {
    let (cluster, nodes) = nodes(&["eu-west", "us-east"], NotLeading::Forward).await;
    let [(a, a_addr), (b, b_addr)] = <[_; 2]>::try_from(nodes).ok().unwrap();
    cluster.lead("acme", &b_addr);
    // Only the eu-west node is configured; the client runs in us-east.
    let client = Client::connect(vec![a_addr], options(3).region("us-east")).unwrap();

    client.claim(claim("acme")).await.unwrap();
    assert_eq!(a.claims(), 0);
    assert_eq!(b.claims(), 1);
    assert!(client.endpoints().contains(&http(&b_addr)));
}

#[tokio::test]
async fn the_region_preference_skips_an_endpoint_that_failed() {
    let (_, nodes) = nodes(&["eu-west", "us-east"], NotLeading::Forward).await;
    let [(a, a_addr), (b, b_addr)] = <[_; 2]>::try_from(nodes).ok().unwrap();
    // A dead us-east member listed before the live one.
    let dead = dead_addr().await;
    a.0.admin
        .edit_members(|m| m.insert(0, sample::member(9, "us-east", &dead)));
    let endpoints = vec![dead, a_addr, b_addr.clone()];
    let client = Client::connect(endpoints, options(3).region("us-east")).unwrap();

    // The first new tenant tries the dead node first, then moves on.
    client.claim(claim("acme")).await.unwrap();
    // The next new tenant skips it and starts at the live us-east node.
    let before = a.claims();
    client.claim(claim("globex")).await.unwrap();
    assert_eq!(a.claims(), before);
    assert!(b.served().contains(&("claim", "globex".to_owned())));
    assert_eq!(client.tenant_endpoint("globex"), Some(http(&b_addr)));
}

#[tokio::test]
async fn without_regions_known_the_default_route_is_used() {
    // No endpoint in the client's region: the call goes where the default route says.
    let (_, nodes) = nodes(&["eu-west"], NotLeading::Forward).await;
    let (node, addr) = nodes.into_iter().next().unwrap();
    let client = Client::connect(vec![addr], options(2).region("mars")).unwrap();
    client.claim(claim("acme")).await.unwrap();
    assert_eq!(node.claims(), 1);
    assert!(Client::connect(vec!["a:1".into()], options(1).region("Mars Base")).is_err());
}

#[tokio::test]
async fn region_admin_calls_are_typed() {
    let (_, nodes) = nodes(&["eu-west"], NotLeading::Forward).await;
    let (node, addr) = nodes.into_iter().next().unwrap();
    let client = Client::connect(vec![addr.clone()], options(2)).unwrap();

    let config = client.cluster_config().await.unwrap();
    assert_eq!((config.mode, config.version), (Mode::Global, 0));
    let config = client.set_mode(Mode::RegionAffinity).await.unwrap();
    assert_eq!((config.mode, config.version), (Mode::RegionAffinity, 1));
    client.add_region("eu-west").await.unwrap();
    let config = client.add_region("us-east").await.unwrap();
    assert_eq!(config.regions.get("us-east"), Some(&2));
    let config = client.bind_tenant("acme", "us-east").await.unwrap();
    assert_eq!(
        config.homes.get("acme").map(String::as_str),
        Some("us-east")
    );
    assert_eq!(config.group_of("acme"), 2);
    let err = client.bind_tenant("acme", "mars").await.unwrap_err();
    assert_eq!(err.reason(), "UNKNOWN_REGION");
    let err = client.set_mode(Mode::Global).await.unwrap_err();
    assert_eq!(err.reason(), "PLACEMENT_CONFLICT");
    let config = client.unbind_tenant("acme").await.unwrap();
    assert!(config.homes.is_empty());

    let groups = client.list_groups().await.unwrap();
    assert_eq!((groups.node_id, groups.region.as_str()), (1, "eu-west"));
    assert_eq!(groups.config.regions.len(), 2);
    assert!(groups.groups[0].is_global());
    let eu = groups.group(1).unwrap();
    assert!(eu.in_failover() && !eu.leader_home);
    assert_eq!(eu.leader_region.as_deref(), Some("us-east"));
    assert_eq!(eu.failover.as_ref().unwrap().epoch, 2);
    assert_eq!(client.list_groups_of(&addr).await.unwrap(), groups);

    let group = client
        .confirm_failover(1, "us-east", "INC-9: eu-west lost", "alice")
        .await
        .unwrap();
    assert_eq!(group.home.as_deref(), Some("us-east"));
    assert!(!group.in_failover());
    let err = client
        .confirm_failover(2, "us-east", "INC-9", "alice")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "NOT_IN_FAILOVER");

    assert_eq!(client.transfer_leader(3).await.unwrap(), 3);
    assert_eq!(client.transfer_leader_in(2, 5).await.unwrap(), 5);

    let sent = node.0.admin.requests();
    let expected = [
        "GetClusterConfigRequest",
        "SetModeRequest { mode: RegionAffinity }",
        r#"AddRegionRequest { name: "eu-west" }"#,
        r#"AddRegionRequest { name: "us-east" }"#,
        r#"BindTenantRequest { tenant: "acme", region: "us-east" }"#,
        r#"BindTenantRequest { tenant: "acme", region: "mars" }"#,
        "SetModeRequest { mode: Global }",
        r#"UnbindTenantRequest { tenant: "acme" }"#,
        "ListGroupsRequest",
        "ListGroupsRequest",
        r#"ConfirmFailoverRequest { group: 1, new_home: "us-east", reason: "INC-9: eu-west lost", admin: "alice" }"#,
        r#"ConfirmFailoverRequest { group: 2, new_home: "us-east", reason: "INC-9", admin: "alice" }"#,
        "TransferLeaderRequest { to: 3, group: 0 }",
        "TransferLeaderRequest { to: 5, group: 2 }",
    ];
    assert_eq!(sent, expected);
}

#[tokio::test]
async fn members_and_status_are_typed() {
    let (_, nodes) = nodes(&["eu-west", "us-east"], NotLeading::Forward).await;
    let (node, addr) = nodes.into_iter().next().unwrap();
    let client = Client::connect(vec![addr.clone()], options(2)).unwrap();

    let membership = client.list_members().await.unwrap();
    let leader = (
        membership.leader_id,
        membership.term,
        membership.commit_index,
    );
    assert_eq!(leader, (Some(1), 3, 40));
    let members: Vec<_> = membership
        .members
        .iter()
        .map(|p| {
            (
                p.member.id,
                p.member.region.as_str(),
                p.matched_index,
                p.lag,
            )
        })
        .collect();
    assert_eq!(members, [(1, "eu-west", 40, 0), (2, "us-east", 40, 0)]);
    assert!(membership.members.iter().all(|p| p.member.voter));

    let status = client.status().await.unwrap();
    assert_eq!((status.node_id, status.leader_id), (1, Some(1)));
    assert_eq!(status.membership[0].api_addr, addr);
    assert_eq!(status.membership[1].zone, "us-east-1a");
    assert_eq!(status.region, "eu-west");
    assert_eq!(status.oldest_pending_age, None);
    assert_eq!(node.status_calls(), 1);
}

#[tokio::test]
async fn region_admin_input_is_checked_before_sending() {
    // Nothing listens: a call that were sent would be UNAVAILABLE.
    let client = Client::connect(vec![dead_addr().await], options(1)).unwrap();
    let cases = [
        client.add_region("EU West").await.unwrap_err(),
        client
            .bind_tenant("bad tenant", "eu-west")
            .await
            .unwrap_err(),
        client.bind_tenant("acme", "").await.unwrap_err(),
        client.unbind_tenant("").await.unwrap_err(),
        client
            .confirm_failover(1, "us east", "INC", "a")
            .await
            .unwrap_err(),
        client
            .confirm_failover(1, "us-east", " ", "a")
            .await
            .unwrap_err(),
        client
            .confirm_failover(0, "us-east", "INC", "a")
            .await
            .unwrap_err(),
    ];
    let reasons: Vec<&str> = cases.iter().map(|e| e.reason()).collect();
    assert_eq!(
        reasons,
        [
            "INVALID_ARGUMENT",
            "INVALID_SCOPE",
            "INVALID_ARGUMENT",
            "INVALID_SCOPE",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
        ]
    );
}
