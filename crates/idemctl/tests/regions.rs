//! The region commands end to end, against a fake `Admin` server in this process (no idemd):
//! what each command sends, what it prints with `-w json` and in tables, and its exit code.

use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use idem_proto::v1::admin_server::{Admin, AdminServer};
use idem_proto::{reason, status, v1};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

/// The fake node's state: the configuration and every request it received.
#[derive(Default)]
struct State {
    addr: Mutex<String>,
    config: Mutex<v1::ClusterConfig>,
    requests: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct Fake(Arc<State>);

type Answer<T> = Result<Response<T>, Status>;

impl Fake {
    fn note(&self, request: &impl std::fmt::Debug) {
        self.0.requests.lock().unwrap().push(format!("{request:?}"));
    }

    fn requests(&self) -> Vec<String> {
        self.0.requests.lock().unwrap().clone()
    }

    fn config(&self) -> v1::ClusterConfig {
        self.0.config.lock().unwrap().clone()
    }

    fn change(&self, edit: impl FnOnce(&mut v1::ClusterConfig)) -> Answer<v1::ClusterConfig> {
        let mut config = self.0.config.lock().unwrap();
        edit(&mut config);
        config.version += 1;
        Ok(Response::new(config.clone()))
    }
}

fn unimplemented<T>() -> Answer<T> {
    Err(Status::unimplemented("fake"))
}

fn groups() -> Vec<v1::GroupStatus> {
    vec![
        v1::GroupStatus {
            group: 0,
            leader_id: 1,
            leader_region: "eu-west".into(),
            leader_home: true,
            term: 3,
            commit_index: 40,
            applied_index: 40,
            ..v1::GroupStatus::default()
        },
        v1::GroupStatus {
            group: 1,
            region: "eu-west".into(),
            home: "eu-west".into(),
            leader_id: 4,
            leader_region: "us-east".into(),
            leader_home: false,
            term: 5,
            commit_index: 12,
            applied_index: 12,
            failover: Some(v1::Failover {
                active: true,
                epoch: 2,
                since_ms: 1_700_000_000_000,
                leader_id: 4,
                leader_region: "us-east".into(),
            }),
            tenants: vec!["acme".into()],
        },
        v1::GroupStatus {
            group: 2,
            region: "us-east".into(),
            home: "us-east".into(),
            leader_id: 4,
            leader_region: "us-east".into(),
            leader_home: true,
            term: 2,
            commit_index: 7,
            applied_index: 7,
            failover: Some(v1::Failover {
                epoch: 1,
                ..v1::Failover::default()
            }),
            tenants: vec![],
        },
    ]
}

#[tonic::async_trait]
impl Admin for Fake {
    async fn list_operations(
        &self,
        _: Request<v1::ListOperationsRequest>,
    ) -> Answer<v1::ListOperationsResponse> {
        unimplemented()
    }

    async fn reconcile(&self, _: Request<v1::ReconcileRequest>) -> Answer<v1::ReconcileResponse> {
        unimplemented()
    }

    async fn purge_subject(
        &self,
        _: Request<v1::PurgeSubjectRequest>,
    ) -> Answer<v1::PurgeSubjectResponse> {
        unimplemented()
    }

    async fn status(&self, _: Request<v1::StatusRequest>) -> Answer<v1::StatusResponse> {
        let addr = self.0.addr.lock().unwrap().clone();
        Ok(Response::new(v1::StatusResponse {
            node_id: 1,
            leader_id: 1,
            term: 3,
            commit_index: 40,
            applied_index: 40,
            last_log_index: 40,
            membership: vec![v1::Member {
                id: 1,
                region: "eu-west".into(),
                zone: "eu-west-1a".into(),
                api_addr: addr,
                raft_addr: "127.0.0.1:1".into(),
                voter: true,
                ..v1::Member::default()
            }],
            region: "eu-west".into(),
            ..v1::StatusResponse::default()
        }))
    }

    async fn list_members(
        &self,
        _: Request<v1::ListMembersRequest>,
    ) -> Answer<v1::ListMembersResponse> {
        unimplemented()
    }

    async fn add_member(&self, _: Request<v1::AddMemberRequest>) -> Answer<v1::AddMemberResponse> {
        unimplemented()
    }

    async fn promote_member(
        &self,
        _: Request<v1::PromoteMemberRequest>,
    ) -> Answer<v1::MembersResponse> {
        unimplemented()
    }

    async fn remove_member(
        &self,
        _: Request<v1::RemoveMemberRequest>,
    ) -> Answer<v1::MembersResponse> {
        unimplemented()
    }

    async fn transfer_leader(
        &self,
        request: Request<v1::TransferLeaderRequest>,
    ) -> Answer<v1::TransferLeaderResponse> {
        self.note(request.get_ref());
        Ok(Response::new(v1::TransferLeaderResponse {
            leader_id: request.get_ref().to,
            term: 9,
        }))
    }

    async fn get_cluster_config(
        &self,
        _: Request<v1::GetClusterConfigRequest>,
    ) -> Answer<v1::ClusterConfig> {
        Ok(Response::new(self.config()))
    }

    async fn set_mode(&self, request: Request<v1::SetModeRequest>) -> Answer<v1::ClusterConfig> {
        self.note(request.get_ref());
        let mode = request.get_ref().mode;
        self.change(|c| c.mode = mode)
    }

    async fn add_region(
        &self,
        request: Request<v1::AddRegionRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.note(request.get_ref());
        let name = request.into_inner().name;
        self.change(|c| {
            let group = c.regions.len() as u64 + 1;
            c.regions.push(v1::Region { name, group });
        })
    }

    async fn bind_tenant(
        &self,
        request: Request<v1::BindTenantRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.note(request.get_ref());
        let wire = request.into_inner();
        if !self.config().regions.iter().any(|r| r.name == wire.region) {
            let message = format!("no region named {}", wire.region);
            return Err(status::error(reason::UNKNOWN_REGION, message, []));
        }
        self.change(|c| {
            c.homes.push(v1::TenantHome {
                tenant: wire.tenant,
                region: wire.region,
            })
        })
    }

    async fn unbind_tenant(
        &self,
        request: Request<v1::UnbindTenantRequest>,
    ) -> Answer<v1::ClusterConfig> {
        self.note(request.get_ref());
        let tenant = request.into_inner().tenant;
        self.change(|c| c.homes.retain(|h| h.tenant != tenant))
    }

    async fn list_groups(
        &self,
        _: Request<v1::ListGroupsRequest>,
    ) -> Answer<v1::ListGroupsResponse> {
        Ok(Response::new(v1::ListGroupsResponse {
            groups: groups(),
            node_id: 1,
            region: "eu-west".into(),
            config: Some(self.config()),
        }))
    }

    async fn confirm_failover(
        &self,
        request: Request<v1::ConfirmFailoverRequest>,
    ) -> Answer<v1::GroupStatus> {
        self.note(request.get_ref());
        let wire = request.into_inner();
        let mut group = groups()
            .into_iter()
            .find(|g| g.group == wire.group)
            .ok_or_else(|| status::error(reason::NOT_FOUND, "no such group", []))?;
        if !group.failover.as_ref().is_some_and(|f| f.active) {
            return Err(status::error(
                reason::NOT_IN_FAILOVER,
                "the group is not in failover",
                [],
            ));
        }
        group.home = wire.new_home;
        group.leader_home = true;
        group.failover = Some(v1::Failover {
            epoch: 3,
            ..v1::Failover::default()
        });
        Ok(Response::new(group))
    }
}

/// Serves a fake node with regions eu-west (1) and us-east (2) in region-affinity mode, on
/// its own runtime; answers it and its address.
fn serve() -> (Fake, String) {
    let fake = Fake::default();
    *fake.0.config.lock().unwrap() = v1::ClusterConfig {
        mode: v1::Mode::Global as i32,
        ..v1::ClusterConfig::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let served = fake.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            *served.0.addr.lock().unwrap() = addr.clone();
            tx.send(addr).unwrap();
            tonic::transport::Server::builder()
                .add_service(AdminServer::new(served))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    (fake, addr)
}

fn idemctl(endpoint: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idemctl"))
        .args(["--endpoints", endpoint, "--max-attempts", "2"])
        .args(args)
        .env_remove("IDEMCTL_OPERATOR")
        .env_remove("USER")
        .output()
        .expect("idemctl runs")
}

/// The JSON object of a `-w json` run, asserting its exit code.
fn json(endpoint: &str, args: &[&str], code: i32) -> serde_json::Value {
    let mut all = vec!["-w", "json"];
    all.extend_from_slice(args);
    let out = idemctl(endpoint, &all);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

fn table(endpoint: &str, args: &[&str]) -> String {
    let out = idemctl(endpoint, args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn configuration_commands() {
    let (fake, addr) = serve();
    let out = json(&addr, &["cluster", "mode", "region-affinity"], 0);
    assert_eq!(
        (out["mode"].as_str(), out["version"].as_u64()),
        (Some("region-affinity"), Some(1))
    );
    let out = json(&addr, &["region", "add", "eu-west"], 0);
    assert_eq!(out["region"], "eu-west");
    assert_eq!(out["group"], 1);
    let out = json(&addr, &["region", "add", "us-east"], 0);
    assert_eq!(out["group"], 2);
    assert_eq!(out["regions"].as_array().unwrap().len(), 2);

    let out = json(&addr, &["tenant", "bind", "acme", "--home", "us-east"], 0);
    assert_eq!(
        out,
        serde_json::json!({
            "tenant": "acme", "home": "us-east", "group": 2, "mode": "region-affinity",
            "version": 4
        })
    );
    let out = json(&addr, &["tenant", "bind", "globex", "--home", "mars"], 1);
    assert_eq!(out["error"], "UNKNOWN_REGION");

    let out = json(&addr, &["tenant", "list"], 0);
    assert_eq!(
        out["tenants"],
        serde_json::json!([{"tenant": "acme", "home": "us-east", "group": 2}])
    );
    let shown = table(&addr, &["cluster", "config"]);
    assert!(shown.contains("mode     region-affinity"), "{shown}");
    assert!(shown.contains("acme    us-east  2"), "{shown}");

    let out = json(&addr, &["tenant", "unbind", "acme"], 0);
    assert_eq!(
        (out["home"].is_null(), out["group"].as_u64()),
        (true, Some(0))
    );

    assert_eq!(
        fake.requests(),
        [
            "SetModeRequest { mode: RegionAffinity }",
            r#"AddRegionRequest { name: "eu-west" }"#,
            r#"AddRegionRequest { name: "us-east" }"#,
            r#"BindTenantRequest { tenant: "acme", region: "us-east" }"#,
            r#"BindTenantRequest { tenant: "globex", region: "mars" }"#,
            r#"UnbindTenantRequest { tenant: "acme" }"#,
        ]
    );
}

#[test]
fn cluster_status_shows_every_group_and_whether_its_leader_is_home() {
    let (_, addr) = serve();
    let out = json(&addr, &["cluster", "status"], 0);
    assert_eq!(out["nodes"][0]["role"], "leader");
    assert_eq!(out["groups_seen_by"], 1);
    let groups = out["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3);
    assert_eq!(groups[0]["home"], "yes");
    assert_eq!(groups[1]["home"], "no");
    assert_eq!(groups[1]["leader_region"], "us-east");
    assert_eq!(groups[1]["failover"], true);
    assert_eq!(groups[1]["tenants"], "acme");

    let shown = table(&addr, &["cluster", "status"]);
    assert!(shown.contains("nodes (1)"), "{shown}");
    assert!(
        shown.contains(
            "GROUP  REGION   HOME_REGION  LEADER  LEADER_REGION  HOME  TERM  COMMIT  FAILOVER"
        ),
        "{shown}"
    );
    assert!(
        shown.contains(
            "1      eu-west  eu-west      4       us-east        no    5     12      true"
        ),
        "{shown}"
    );
}

#[test]
fn failover_status_confirm_and_leader_transfer_by_region_name() {
    let (fake, addr) = serve();
    json(&addr, &["cluster", "mode", "region-affinity"], 0);
    json(&addr, &["region", "add", "eu-west"], 0);
    json(&addr, &["region", "add", "us-east"], 0);

    let out = json(&addr, &["failover", "status"], 0);
    assert_eq!(out["in_failover"], 1);
    let groups = out["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["active"], true);
    assert_eq!(groups[0]["since_at_ms"], 1_700_000_000_000u64);
    assert!(groups[0]["in_failover_ms"].as_u64().unwrap() > 0);
    let shown = table(&addr, &["failover", "status"]);
    assert!(shown.contains("2023-11-14T22:13:20.000Z"), "{shown}");

    let out = json(
        &addr,
        &[
            "failover",
            "confirm",
            "--group",
            "eu-west",
            "--new-home",
            "us-east",
            "--reason",
            "INC-42: eu-west lost",
            "--admin",
            "alice",
        ],
        0,
    );
    assert_eq!(out["home"], "us-east");
    assert_eq!(out["active"], false);
    assert_eq!(out["epoch"], 3);
    assert_eq!(out["admin"], "alice");

    let confirm = |group: &str| {
        json(
            &addr,
            &[
                "failover",
                "confirm",
                "--group",
                group,
                "--new-home",
                "us-east",
                "--reason",
                "x",
            ],
            1,
        )
    };
    assert_eq!(confirm("us-east")["error"], "NOT_IN_FAILOVER");
    assert_eq!(confirm("mars")["error"], "UNKNOWN_REGION");

    let out = json(&addr, &["leader", "transfer", "4", "--group", "eu-west"], 0);
    assert_eq!(
        (out["leader_id"].as_u64(), out["group"].as_u64()),
        (Some(4), Some(1))
    );
    let out = json(&addr, &["leader", "transfer", "2"], 0);
    assert_eq!(out["group"], 0);

    let sent: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("SetMode") && !r.starts_with("AddRegion"))
        .collect();
    assert_eq!(
        sent,
        [
            r#"ConfirmFailoverRequest { group: 1, new_home: "us-east", reason: "INC-42: eu-west lost", admin: "alice" }"#,
            r#"ConfirmFailoverRequest { group: 2, new_home: "us-east", reason: "x", admin: "idemctl" }"#,
            "TransferLeaderRequest { to: 4, group: 1 }",
            "TransferLeaderRequest { to: 2, group: 0 }",
        ]
    );
}
