//! The region commands end to end, against a fake `Admin` server in this process (no idemd):
//! what each command sends, what it prints with `-w json` and in tables, and its exit code.

use std::process::{Command, Output};

use idem_proto::testing::{admin, sample, FakeAdmin};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// Serves node 1 of a fake cluster (in eu-west, global mode, no region defined yet; the
/// groups of `idem_proto::testing::sample`) on its own runtime; answers it and its address.
fn serve() -> (FakeAdmin, String) {
    let fake = FakeAdmin::new(1, "eu-west");
    let (tx, rx) = std::sync::mpsc::channel();
    let served = fake.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            served.edit_members(|m| m.push(sample::member(1, "eu-west", &addr)));
            tx.send(addr).unwrap();
            tonic::transport::Server::builder()
                .add_service(admin::service(served))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    (fake, addr)
}

/// The changes the fake received (its reads left out).
fn changes(fake: &FakeAdmin) -> Vec<String> {
    let reads = ["Status", "ListGroups", "GetClusterConfig"];
    fake.requests()
        .into_iter()
        .filter(|r| !reads.iter().any(|read| r.starts_with(read)))
        .collect()
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
        changes(&fake),
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
    assert_eq!(groups[1]["tenants"], "acme,globex");

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

    let sent: Vec<String> = changes(&fake)
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
