//! A bit flip's replacement cut short: the damaged node refused its data and was removed and
//! wiped, but could not be added back (a matrix run hit this with `pause all` right after a
//! `bitflip`: no live node took the call; here an idemctl that refuses `member add` stands in
//! for that). The next heal must finish the replacement (the node added and promoted,
//! healthy again), not report that the node "started on the damaged data" while it waits,
//! outside the group, to be added.
//!
//! Ignored by default for the same reasons as `real_run` (root, namespaces, a built idemd and
//! idemctl):
//!
//! ```sh
//! cargo build --release --bin idemd --bin idemctl
//! sudo -E cargo test --release -p idem-jepsen --test jepsen bitflip_replace:: -- --ignored
//! ```

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use idem_jepsen::cluster::config::Timings;
use idem_jepsen::cluster::regions::Regions;
use idem_jepsen::cluster::security::SecurityMode;
use idem_jepsen::cluster::{health, tools, Cluster, ClusterSpec};
use idem_jepsen::nemesis::bitflip::{self, FileKind, Recovery};
use idem_jepsen::nemesis::membership::Membership;
use idem_testkit::Rng;

#[test]
#[ignore = "needs root, network namespaces and a built idemd and idemctl"]
fn a_replacement_cut_short_is_finished_by_the_next_heal() {
    let dir = tempfile::tempdir().unwrap();
    let regions = Regions::new(3, 1, &[]).unwrap();
    let spec = ClusterSpec {
        prefix: "idemb".into(),
        nodes: 3,
        timings: Timings::for_rtt(regions.max_rtt()),
        regions,
        idemd: tools::locate_idemd(None).unwrap(),
        dir: dir.path().join("nodes"),
        fake_clock: false,
        fake_monotonic: false,
        fault_disks: false,
        snapshot_logs: None,
        log_level: "info".into(),
        security: SecurityMode::Plaintext,
    };
    let cluster = Cluster::create(&spec).unwrap();
    cluster.enter_hub().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(cluster.boot(Duration::from_secs(30)))
        .unwrap();
    let idemctl = tools::locate_binary("idemctl", None).unwrap();
    let membership = Membership::locate(Some(&idemctl)).unwrap();
    let refusing = Membership::locate(Some(&refusing_add(dir.path(), &idemctl))).unwrap();

    // n1's MANIFEST damaged: it refuses to start, is removed and wiped, and the add fails.
    let damage = bitflip::corrupt(&cluster, 1, FileKind::Manifest, &mut Rng::new(7)).unwrap();
    assert_eq!(damage.kind, FileKind::Manifest, "{damage}");
    let cut_short = bitflip::restart_or_replace(&cluster, &refusing, 1);
    assert!(cut_short.is_err(), "{cut_short:?}");
    assert!(cluster.node(1).replacing().is_some());

    let healed = bitflip::restart_or_replace(&cluster, &membership, 1).unwrap();
    assert!(
        matches!(&healed, Recovery::Replaced(why) if why.contains("MANIFEST")),
        "{healed}"
    );
    assert!(cluster.node(1).replacing().is_none());
    let all = cluster.ids();
    runtime
        .block_on(health::wait_healthy(
            &cluster.topology,
            &all,
            Duration::from_secs(30),
        ))
        .unwrap();
    cluster.teardown();
}

/// An idemctl that fails `member add` and runs every other command.
fn refusing_add(dir: &Path, idemctl: &Path) -> std::path::PathBuf {
    let script = dir.join("idemctl-refusing-add");
    let text = format!(
        "#!/bin/sh\ncase \"$*\" in *\"member add\"*) echo refused >&2; exit 1;; esac\nexec {} \"$@\"\n",
        idemctl.display()
    );
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}
