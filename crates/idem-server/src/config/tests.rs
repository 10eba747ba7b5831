//! Tests of the configuration: sources, precedence, errors, printing.

use std::collections::HashMap;
use std::io::Write;

use idem_core::Risk;

use super::*;

/// Loads a development node's configuration: authentication off (`IDEM_AUTH=off`) unless
/// `env` says otherwise, so that these tests need no credentials file. The `[auth]` tests
/// use [`load_exactly`].
fn load(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let mut env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.entry("IDEM_AUTH".to_owned())
        .or_insert_with(|| "off".to_owned());
    load_env(args, &env)
}

/// Loads exactly what the arguments and `env` say, as idemd does.
fn load_exactly(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    load_env(args, &env)
}

fn load_env(args: &[&str], env: &HashMap<String, String>) -> Result<Config, ConfigError> {
    let argv = std::iter::once("idemd").chain(args.iter().copied());
    Config::load(argv, &|name| env.get(name).cloned()).map(|i| i.config)
}

/// The default configuration of a development node (authentication off).
fn dev_default() -> Config {
    Config {
        auth: AuthConfig::off(),
        ..Config::default()
    }
}

fn problems(result: Result<Config, ConfigError>) -> Vec<String> {
    match result {
        Err(ConfigError::Invalid(problems)) => problems,
        other => panic!("expected invalid configuration, got {other:?}"),
    }
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

#[test]
fn defaults_match_the_design() {
    let config = load(&[], &[]).unwrap();
    assert_eq!(config, dev_default());
    assert_eq!(config.api_addr.to_string(), "127.0.0.1:7400");
    assert_eq!(config.raft_addr.to_string(), "127.0.0.1:7410");
    assert_eq!(config.http_addr.to_string(), "127.0.0.1:7480");
    assert_eq!(config.write_timeout, Duration::from_secs(5));
    assert_eq!(config.sweep_interval, Duration::from_secs(10));
    assert_eq!(config.sweep_batch, 1000);
    assert_eq!(config.max_request_bytes, 2 * 1024 * 1024);
    assert_eq!(config.max_body_bytes, 1024 * 1024);
    assert_eq!(config.policies.default, Policy::default());
}

#[test]
fn flags_beat_environment_beat_file() {
    let f =
        file("node_id = 7\nsweep_batch = 10\nregion = \"eu-west\"\n[raft]\nsnapshot_logs = 500\n");
    let path = f.path().to_str().unwrap();

    let config = load(&["--config", path], &[]).unwrap();
    assert_eq!(
        (config.node_id, config.sweep_batch, config.region.as_str()),
        (7, 10, "eu-west")
    );
    assert_eq!(config.raft.snapshot_logs, 500);

    let env = [("IDEM_NODE_ID", "8"), ("IDEM_SWEEP_BATCH", "20")];
    let config = load(&["--config", path], &env).unwrap();
    assert_eq!((config.node_id, config.sweep_batch), (8, 20));
    assert_eq!(config.region, "eu-west", "file value still used");

    let config = load(&["--config", path, "--node-id", "9"], &env).unwrap();
    assert_eq!((config.node_id, config.sweep_batch), (9, 20));

    // The file may also be named by the environment.
    let config = load(&[], &[("IDEM_CONFIG", path)]).unwrap();
    assert_eq!(config.node_id, 7);
}

#[test]
fn durations_are_human_readable() {
    let f = file("write_timeout = \"1500ms\"\n[policy]\nretention = \"7d\"\nlease = \"2m\"\n");
    let config = load(
        &[
            "--config",
            f.path().to_str().unwrap(),
            "--read-timeout",
            "2s",
        ],
        &[("IDEM_SWEEP_INTERVAL", "1m")],
    )
    .unwrap();
    assert_eq!(config.write_timeout, Duration::from_millis(1500));
    assert_eq!(config.read_timeout, Duration::from_secs(2));
    assert_eq!(config.sweep_interval, Duration::from_secs(60));
    assert_eq!(
        config.policies.default.retention,
        Duration::from_secs(7 * 86_400)
    );
    assert_eq!(config.policies.default.lease, Duration::from_secs(120));
}

#[test]
fn every_problem_is_one_line_naming_key_value_and_source() {
    let f = file("sweep_batch = 0\nlog_format = \"xml\"\n");
    let lines = problems(load(
        &[
            "--config",
            f.path().to_str().unwrap(),
            "--write-timeout",
            "soon",
        ],
        &[("IDEM_API_ADDR", "localhost")],
    ));
    assert_eq!(lines.len(), 4, "{lines:#?}");
    for line in &lines {
        assert!(!line.contains('\n'), "{line}");
    }
    let find = |key: &str| lines.iter().find(|l| l.starts_with(key)).unwrap();
    assert!(find("write_timeout").contains("flag --write-timeout"));
    assert!(find("write_timeout").contains("\"soon\""));
    assert!(find("api_addr").contains("environment IDEM_API_ADDR"));
    assert!(find("sweep_batch").contains("must be between 1 and 10000"));
    assert!(find("log_format").contains("expected text or json"));
}

#[test]
fn key_warnings_is_a_switch_on_by_default() {
    assert!(load(&[], &[]).unwrap().key_warnings);
    let f = file("key_warnings = false\n");
    let config = load(&["--config", f.path().to_str().unwrap()], &[]).unwrap();
    assert!(!config.key_warnings);
    let config = load(&["--key-warnings", "on"], &[("IDEM_KEY_WARNINGS", "off")]).unwrap();
    assert!(config.key_warnings, "the flag beats the environment");
    let lines = problems(load(&["--key-warnings", "maybe"], &[]));
    assert!(lines[0].contains("expected on or off"), "{lines:?}");
}

#[test]
fn cross_field_rules() {
    let lines = problems(load(
        &[
            "--max-request-bytes",
            "65536",
            "--max-body-bytes",
            "100000",
            "--raft-heartbeat-interval",
            "500ms",
            "--raft-election-timeout",
            "1s",
        ],
        &[],
    ));
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines[0].starts_with("max_body_bytes"));
    assert!(lines[1].starts_with("raft.election_timeout"));
}

#[test]
fn unknown_keys_and_bad_syntax_are_reported() {
    let f = file("node_idd = 3\n[raft]\nheartbeat = \"1s\"\n");
    let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("node_idd")));
    assert!(lines.iter().any(|l| l.starts_with("raft.heartbeat")));

    let f = file("node_id = \n");
    let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains(":1:"), "{}", lines[0]);

    let lines = problems(load(&["--config", "/nonexistent/idem.toml"], &[]));
    assert!(lines[0].starts_with("config file /nonexistent/idem.toml"));
}

#[test]
fn endpoint_policies_come_from_the_file() {
    let f = file(
        r#"
[policy]
risk = "normal"

[policies."POST /v1/charges"]
risk = "HIGH"
retention = "7d"

[policies."POST /v1/exports"]
lease = "5m"
max_result_bytes = 1024
"#,
    );
    let config = load(&["--config", f.path().to_str().unwrap()], &[]).unwrap();
    let charges = config.policies.for_endpoint("POST /v1/charges");
    assert_eq!(charges.risk, Risk::High);
    assert_eq!(charges.retention, Duration::from_secs(7 * 86_400));
    assert_eq!(charges.lease, Duration::from_secs(30));
    let exports = config.policies.for_endpoint("POST /v1/exports");
    assert_eq!(exports.lease, Duration::from_secs(300));
    assert_eq!(exports.max_result_bytes, 1024);
}

#[test]
fn bad_endpoint_policies_name_the_endpoint() {
    let f = file(
        r#"
[policies."charges"]
risk = "HIGH"

[policies."POST /v1/x"]
lease = "2h"
risk = "EXTREME"
"#,
    );
    let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("policies.\"charges\"")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("policies.\"POST /v1/x\".risk")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("policies.\"POST /v1/x\"") && l.contains("lease: must be between")));
}

#[test]
fn printed_config_loads_back_identically() {
    let f = file(
            "node_id = 3\nlog_format = \"json\"\n[policies.\"POST /v1/charges\"]\nrisk = \"HIGH\"\nretention = \"7d\"\n",
        );
    let config = load(
        &[
            "--config",
            f.path().to_str().unwrap(),
            "--sweep-interval",
            "90s",
        ],
        &[],
    )
    .unwrap();
    let printed = config.to_toml();
    let again = file(&printed);
    let reloaded = load(&["--config", again.path().to_str().unwrap()], &[]).unwrap();
    assert_eq!(reloaded, config, "{printed}");
}

#[test]
fn help_and_version_are_cli_errors_for_clap_to_print() {
    assert!(matches!(
        Config::load(["idemd", "--help"], &|_| None),
        Err(ConfigError::Cli(_))
    ));
    assert!(matches!(
        Config::load(["idemd", "--no-such-flag"], &|_| None),
        Err(ConfigError::Cli(_))
    ));
}

#[test]
fn cluster_members_come_from_file_env_or_flags() {
    let f = file(
        r#"
node_id = 2
raft_addr = "127.0.0.1:7411"
api_addr = "127.0.0.1:7401"
[cluster]
initial_members = [
  { id = 1, raft_addr = "127.0.0.1:7410", api_addr = "127.0.0.1:7400", region = "r1", zone = "r1-a" },
  { id = 2, raft_addr = "127.0.0.1:7411", api_addr = "127.0.0.1:7401" },
]
"#,
    );
    let path = f.path().to_str().unwrap();
    let config = load(&["--config", path], &[]).unwrap();
    assert_eq!(config.cluster.initial_members.len(), 2);
    assert!(!config.cluster.join);
    let again = file(&config.to_toml());
    let reloaded = load(&["--config", again.path().to_str().unwrap()], &[]).unwrap();
    assert_eq!(reloaded.cluster, config.cluster);

    let env = [(
        "IDEM_INITIAL_MEMBERS",
        "2=127.0.0.1:7411,127.0.0.1:7401;3=127.0.0.1:7412,127.0.0.1:7402,r3",
    )];
    let config = load(&["--config", path], &env).unwrap();
    let ids: Vec<u64> = config
        .cluster
        .initial_members
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, vec![2, 3]);

    let lines = problems(load(
        &[
            "--config",
            path,
            "--initial-member",
            "1=127.0.0.1:7410,127.0.0.1:7400",
        ],
        &[],
    ));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("node_id = 2) is not listed"),
        "{}",
        lines[0]
    );
    let config = load(
        &[
            "--config",
            path,
            "--initial-member",
            "1=127.0.0.1:7410,127.0.0.1:7400",
            "--join",
        ],
        &[],
    )
    .unwrap();
    assert!(config.cluster.join);
}

#[test]
fn raft_config_is_valid() {
    let raft = Config::default().raft_config().unwrap();
    assert_eq!(raft.enable_pre_vote, Some(true));
    assert_eq!(raft.heartbeat_interval, 250);
    assert_eq!(raft.election_timeout_min, 1000);
    assert_eq!(raft.election_timeout_max, 2000);
}

#[test]
fn auth_is_on_by_default_and_needs_a_credentials_file() {
    let lines = problems(load_exactly(&[], &[]));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("auth.credentials: required"),
        "{}",
        lines[0]
    );
    // The message names both ways out: a credentials file, or a development node.
    assert!(lines[0].contains("--auth-credentials FILE"), "{}", lines[0]);
    assert!(lines[0].contains("--auth off"), "{}", lines[0]);
    assert_eq!(AuthConfig::default().mode, crate::auth::AuthMode::On);
}

#[test]
fn auth_mode_and_credentials_come_from_file_env_or_flags() {
    let f = file("[auth]\nmode = \"on\"\ncredentials = \"/etc/idem/credentials.toml\"\n");
    let config = load_exactly(&["--config", f.path().to_str().unwrap()], &[]).unwrap();
    assert_eq!(config.auth.mode, crate::auth::AuthMode::On);
    assert_eq!(
        config.auth.credentials.as_deref(),
        Some(Path::new("/etc/idem/credentials.toml"))
    );

    let env = [("IDEM_AUTH_CREDENTIALS", "/run/creds.toml")];
    let config = load_exactly(&[], &env).unwrap();
    assert_eq!(
        config.auth.credentials.as_deref(),
        Some(Path::new("/run/creds.toml"))
    );

    let config = load_exactly(&["--auth", "off"], &[("IDEM_AUTH", "on")]).unwrap();
    assert_eq!(config.auth, AuthConfig::off());

    let lines = problems(load_exactly(&[], &[("IDEM_AUTH", "maybe")]));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("auth.mode") && l.contains("expected on or off")),
        "{lines:#?}"
    );
}

#[test]
fn printed_auth_section_loads_back() {
    let config = load_exactly(&["--auth-credentials", "/etc/idem/credentials.toml"], &[]).unwrap();
    let printed = config.to_toml();
    assert!(printed.contains("mode = \"on\""), "{printed}");
    let again = file(&printed);
    let reloaded = load_exactly(&["--config", again.path().to_str().unwrap()], &[]).unwrap();
    assert_eq!(reloaded, config, "{printed}");
}
