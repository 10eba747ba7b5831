//! `idemctl cluster config|mode`, `region add`, `tenant bind|unbind|list`,
//! `failover status|confirm`, and the group rows of `cluster status`.
//!
//! Configuration changes go to any endpoint (the node forwards them to the global group's
//! leader) and answer the configuration after the change. Group and failover views come from
//! one node's `ListGroups` (not linearizable: that node's view), which also resolves a
//! `--group` given as a region name, so that it works while the global group is unavailable.

use std::time::{SystemTime, UNIX_EPOCH};

use idem_client::{Client, ClientError, Code, GroupStatus, Groups};
use idem_core::placement::{validate_region, ClusterConfig, GroupId, Mode};

use super::operator;
use crate::cli::{
    FailoverConfirmArgs, GroupArg, ModeArg, ModeArgs, RegionAddArgs, TenantArgs, TenantBindArgs,
};
use crate::error::CliError;
use crate::output::{millis, Doc, Value};

/// Columns of the region table.
const REGION_COLUMNS: &[&str] = &["name", "group"];

/// Columns of the tenant-home table.
const HOME_COLUMNS: &[&str] = &["tenant", "home", "group"];

/// Columns of the group table of `cluster status`.
pub const GROUP_COLUMNS: &[&str] = &[
    "group",
    "region",
    "home_region",
    "leader",
    "leader_region",
    "home",
    "term",
    "commit",
    "failover",
];

/// Columns of `failover status`.
const FAILOVER_COLUMNS: &[&str] = &[
    "group",
    "region",
    "home",
    "active",
    "epoch",
    "since_at_ms",
    "leader",
    "leader_region",
    "in_failover_ms",
];

/// `idemctl cluster config`.
pub async fn config(client: &Client) -> Result<Doc, CliError> {
    Ok(config_doc(&client.cluster_config().await?))
}

/// `idemctl cluster mode`.
pub async fn mode(client: &Client, args: ModeArgs) -> Result<Doc, CliError> {
    let mode = match args.mode {
        ModeArg::Global => Mode::Global,
        ModeArg::RegionAffinity => Mode::RegionAffinity,
    };
    Ok(config_doc(&client.set_mode(mode).await?))
}

/// `idemctl region add`.
pub async fn add(client: &Client, args: RegionAddArgs) -> Result<Doc, CliError> {
    let config = client.add_region(&args.name).await?;
    let group = config.regions.get(&args.name).copied();
    Ok(Doc::new()
        .with("region", args.name)
        .with("group", group)
        .extend(config_doc(&config)))
}

/// `idemctl tenant bind`.
pub async fn bind(client: &Client, args: TenantBindArgs) -> Result<Doc, CliError> {
    let config = client.bind_tenant(&args.tenant, &args.home).await?;
    Ok(home_doc(&config, &args.tenant))
}

/// `idemctl tenant unbind`.
pub async fn unbind(client: &Client, args: TenantArgs) -> Result<Doc, CliError> {
    let config = client.unbind_tenant(&args.tenant).await?;
    Ok(home_doc(&config, &args.tenant))
}

/// `idemctl tenant list`.
pub async fn tenants(client: &Client) -> Result<Doc, CliError> {
    let config = client.cluster_config().await?;
    Ok(Doc::new()
        .with("mode", config.mode.name())
        .with("version", config.version)
        .with(
            "tenants",
            Value::Rows {
                rows: home_rows(&config),
                columns: HOME_COLUMNS,
            },
        ))
}

/// `idemctl failover status`.
pub async fn failover_status(client: &Client) -> Result<Doc, CliError> {
    let groups = client.list_groups().await?;
    Ok(failover_doc(&groups, now_ms()))
}

/// `idemctl failover confirm`.
pub async fn confirm(client: &Client, args: FailoverConfirmArgs) -> Result<Doc, CliError> {
    // Bad input fails before anything is asked, even with --group given by name.
    validate_region(&args.new_home).map_err(ClientError::from)?;
    let group = resolve_group(client, &args.group).await?;
    let admin = operator(args.admin);
    let status = client
        .confirm_failover(group, &args.new_home, &args.reason, &admin)
        .await?;
    Ok(group_doc(&status, now_ms())
        .with("admin", admin)
        .with("reason", args.reason))
}

/// The id of the group a `--group` names: a number as is, a region name through the
/// configuration one node has applied (`UNKNOWN_REGION` when it has no such region).
pub async fn resolve_group(client: &Client, group: &GroupArg) -> Result<GroupId, CliError> {
    match group {
        GroupArg::Id(id) => Ok(*id),
        GroupArg::Region(name) => {
            let groups = client.list_groups().await?;
            group_of_region(&groups.config, name)
        }
    }
}

fn group_of_region(config: &ClusterConfig, name: &str) -> Result<GroupId, CliError> {
    config.regions.get(name).copied().ok_or_else(|| {
        CliError::from(ClientError::Rejected {
            reason: "UNKNOWN_REGION".into(),
            code: Code::NotFound,
            message: format!("no region named {name} (see `idemctl cluster config`)"),
            retry_after: None,
        })
    })
}

/// The configuration: mode, version, regions and homes.
pub fn config_doc(config: &ClusterConfig) -> Doc {
    let regions = config
        .regions
        .iter()
        .map(|(name, group)| Doc::new().with("name", name.as_str()).with("group", *group))
        .collect();
    Doc::new()
        .with("mode", config.mode.name())
        .with("version", config.version)
        .with(
            "regions",
            Value::Rows {
                rows: regions,
                columns: REGION_COLUMNS,
            },
        )
        .with(
            "homes",
            Value::Rows {
                rows: home_rows(config),
                columns: HOME_COLUMNS,
            },
        )
}

fn home_rows(config: &ClusterConfig) -> Vec<Doc> {
    config
        .homes
        .iter()
        .map(|(tenant, region)| {
            Doc::new()
                .with("tenant", tenant.as_str())
                .with("home", region.as_str())
                .with("group", config.regions.get(region).copied())
        })
        .collect()
}

/// One tenant's placement after a bind or unbind: its home (none: the global group).
fn home_doc(config: &ClusterConfig, tenant: &str) -> Doc {
    Doc::new()
        .with("tenant", tenant)
        .with("home", config.homes.get(tenant).cloned())
        .with("group", config.group_of(tenant))
        .with("mode", config.mode.name())
        .with("version", config.version)
}

/// A row of the group table of `cluster status`.
pub fn group_row(g: &GroupStatus) -> Doc {
    let home = g
        .leader_id
        .map(|_| if g.leader_home { "yes" } else { "no" });
    Doc::new()
        .with("group", g.group)
        .with("region", g.region.clone())
        .with("home_region", g.home.clone())
        .with("leader", g.leader_id)
        .with("leader_region", g.leader_region.clone())
        .with("home", home)
        .with("leader_home", g.leader_home)
        .with("term", g.term)
        .with("commit", g.commit_index)
        .with("applied", g.applied_index)
        .with("failover", g.in_failover())
        .with("epoch", g.failover.as_ref().map(|f| f.epoch))
        .with("tenants", tenant_list(g))
}

/// The failover rows of every region group, as one node sees them.
fn failover_doc(groups: &Groups, now_ms: u64) -> Doc {
    let rows: Vec<Doc> = groups
        .groups
        .iter()
        .filter(|g| !g.is_global())
        .map(|g| group_doc(g, now_ms))
        .collect();
    let active = groups.groups.iter().filter(|g| g.in_failover()).count();
    Doc::new()
        .with("node", groups.node_id)
        .with("node_region", groups.region.as_str())
        .with("in_failover", u64::try_from(active).unwrap_or(u64::MAX))
        .with(
            "groups",
            Value::Rows {
                rows,
                columns: FAILOVER_COLUMNS,
            },
        )
}

/// A region group's failover state. `leader` and `leader_region` are the current leader;
/// `recorded_by` and `recorded_region` the leader that recorded the failover.
fn group_doc(g: &GroupStatus, now_ms: u64) -> Doc {
    let failover = g.failover.as_ref();
    let since = failover.and_then(|f| f.since).map(|t| t.millis());
    let active = g.in_failover();
    Doc::new()
        .with("group", g.group)
        .with("region", g.region.clone())
        .with("home", g.home.clone())
        .with("active", active)
        .with("epoch", failover.map(|f| f.epoch))
        .with("since_at_ms", since.filter(|_| active))
        .with("leader", g.leader_id)
        .with("leader_region", g.leader_region.clone())
        .with("leader_home", g.leader_home)
        .with(
            "in_failover_ms",
            since
                .filter(|_| active)
                .map(|since| now_ms.saturating_sub(since)),
        )
        .with("recorded_by", failover.and_then(|f| f.leader_id))
        .with(
            "recorded_region",
            failover.and_then(|f| f.leader_region.clone()),
        )
        .with("tenants", tenant_list(g))
}

fn tenant_list(g: &GroupStatus) -> Value {
    if g.tenants.is_empty() {
        Value::Null
    } else {
        Value::Str(g.tenants.join(","))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

#[cfg(test)]
mod tests {
    use idem_client::{Client, ClientOptions};
    use idem_proto::testing::{admin, FakeAdmin};
    use tokio::net::TcpListener;
    use tokio_stream::wrappers::TcpListenerStream;

    use super::*;
    use crate::output::{to_json, to_table};

    fn config() -> ClusterConfig {
        let mut config = ClusterConfig {
            mode: Mode::RegionAffinity,
            version: 5,
            ..ClusterConfig::default()
        };
        config.regions.insert("eu-west".into(), 1);
        config.regions.insert("us-east".into(), 2);
        config.homes.insert("acme".into(), "us-east".into());
        config
    }

    /// The groups of `idem_proto::testing::sample` as the SDK reads them from a fake node.
    fn groups() -> Groups {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let fake = FakeAdmin::new(2, "eu-west");
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(admin::service(fake))
                    .serve_with_incoming(TcpListenerStream::new(listener)),
            );
            let client = Client::connect(vec![addr], ClientOptions::default()).unwrap();
            client.list_groups().await.unwrap()
        })
    }

    #[test]
    fn configuration_table_and_json() {
        let doc = config_doc(&config());
        assert_eq!(
            to_table(&doc),
            "mode     region-affinity\nversion  5\n\nregions (2)\nNAME     GROUP\neu-west  1\nus-east  2\n\nhomes (1)\nTENANT  HOME     GROUP\nacme    us-east  2\n"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "mode": "region-affinity",
                "version": 5,
                "regions": [{"name": "eu-west", "group": 1}, {"name": "us-east", "group": 2}],
                "homes": [{"tenant": "acme", "home": "us-east", "group": 2}],
            })
        );
        let bound = home_doc(&config(), "acme");
        assert_eq!(bound.get("group"), Some(&Value::Num(2)));
        let unbound = home_doc(&config(), "globex");
        assert_eq!(unbound.get("home"), Some(&Value::Null));
        assert_eq!(unbound.get("group"), Some(&Value::Num(0)));
    }

    #[test]
    fn group_rows_say_whether_the_leader_is_home() {
        let rows: Vec<Doc> = groups().groups.iter().map(group_row).collect();
        let doc = Doc::new().with(
            "groups",
            Value::Rows {
                rows,
                columns: GROUP_COLUMNS,
            },
        );
        assert_eq!(
            to_table(&doc),
            "groups (3)\n\
             GROUP  REGION   HOME_REGION  LEADER  LEADER_REGION  HOME  TERM  COMMIT  FAILOVER\n\
             0      -        -            1       eu-west        yes   3     40      false\n\
             1      eu-west  eu-west      4       us-east        no    5     12      true\n\
             2      us-east  us-east      -       -              -     2     7       false\n"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(json["groups"][1]["tenants"], "acme,globex");
        assert_eq!(json["groups"][1]["leader_home"], false);
        assert_eq!(json["groups"][1]["epoch"], 2);
        assert_eq!(json["groups"][0]["region"], serde_json::Value::Null);
    }

    #[test]
    fn failover_status_lists_region_groups_with_their_time_in_failover() {
        let now = 1_700_000_090_000;
        let doc = failover_doc(&groups(), now);
        let json: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(json["in_failover"], 1);
        let rows = json["groups"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "region groups only");
        assert_eq!(rows[0]["active"], true);
        assert_eq!(rows[0]["since_at_ms"], 1_700_000_000_000u64);
        assert_eq!(rows[0]["in_failover_ms"], 90_000);
        assert_eq!(rows[0]["recorded_region"], "us-east");
        assert_eq!(rows[1]["active"], false);
        assert_eq!(rows[1]["in_failover_ms"], serde_json::Value::Null);
        let table = to_table(&doc);
        assert!(table.contains("2023-11-14T22:13:20.000Z"), "{table}");
        assert!(table.contains("1m 30s"), "{table}");
    }

    #[test]
    fn regions_resolve_to_group_ids() {
        assert_eq!(group_of_region(&config(), "us-east").unwrap(), 2);
        let err = group_of_region(&config(), "mars").unwrap_err();
        assert_eq!((err.reason(), err.exit_code()), ("UNKNOWN_REGION", 1));
    }
}
