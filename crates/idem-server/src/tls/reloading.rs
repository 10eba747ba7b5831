//! A port's TLS configuration, rebuilt from its files without a restart.
//!
//! Certificates are rotated by replacing files, so the node watches them: every
//! [`RELOAD_POLL`] it compares each file's inode, size and modification time with what it
//! last loaded, and SIGHUP forces a reload. A new configuration is swapped in atomically
//! (arc-swap): handshakes already running finish with the old one, every later handshake
//! uses the new one, established connections are not touched. A reload that fails (a key
//! that does not match the certificate yet, half-written PEM) leaves the previous
//! configuration serving and is logged once per state of the files; the next change is
//! tried again.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use tokio::signal::unix::{signal, SignalKind};

use super::{TlsError, TlsSource};

/// How often the certificate files are checked for a change.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// What identifies one version of a file (inode, size, mtime in ns); `None`: unreadable.
type Stamp = Vec<Option<(u64, u64, i64, i64)>>;

/// The current TLS configuration of a port (and, for the Raft port, of this node's
/// connections to its peers).
pub struct ReloadingTls {
    port: &'static str,
    source: TlsSource,
    paths: Vec<PathBuf>,
    server: ArcSwap<ServerConfig>,
    peer_client: Option<idem_raft::PeerTls>,
    stamp: Mutex<Stamp>,
}

impl ReloadingTls {
    /// Builds the configuration of `port` (`API`, `Raft`) from `source`; an error here
    /// stops the node from starting.
    pub fn load(port: &'static str, source: TlsSource) -> Result<Arc<Self>, TlsError> {
        let paths = source.paths();
        let stamp = stamp_of(&paths);
        let built = source.build()?;
        Ok(Arc::new(ReloadingTls {
            port,
            source,
            paths,
            server: ArcSwap::new(built.server),
            peer_client: built.client.map(idem_raft::PeerTls::new),
            stamp: Mutex::new(stamp),
        }))
    }

    /// [`ReloadingTls::load`] and [`ReloadingTls::spawn_watcher`] when `source` is set.
    pub fn watched(
        port: &'static str,
        source: Option<TlsSource>,
    ) -> Result<Option<Arc<Self>>, TlsError> {
        let Some(source) = source else {
            return Ok(None);
        };
        let tls = Self::load(port, source)?;
        Self::spawn_watcher(&tls);
        Ok(Some(tls))
    }

    /// The port's name in logs.
    pub fn port(&self) -> &'static str {
        self.port
    }

    /// The configuration new handshakes use.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.load_full()
    }

    /// The client side of peer TLS (the Raft port's source only), kept current by reloads.
    pub fn peer_client(&self) -> Option<idem_raft::PeerTls> {
        self.peer_client.clone()
    }

    /// Rebuilds from the files now and swaps the result in.
    pub fn reload(&self) -> Result<(), TlsError> {
        *self.lock_stamp() = stamp_of(&self.paths);
        let built = self.source.build()?;
        self.server.store(built.server);
        if let (Some(peer), Some(client)) = (&self.peer_client, built.client) {
            peer.replace(client);
        }
        Ok(())
    }

    /// Reloads if a file changed since the last attempt.
    fn reload_if_changed(&self) {
        if *self.lock_stamp() != stamp_of(&self.paths) {
            self.reload_logged("files changed");
        }
    }

    fn reload_logged(&self, why: &'static str) {
        match self.reload() {
            Ok(()) => tracing::info!(port = self.port, why, "TLS certificates reloaded"),
            Err(error) => tracing::warn!(
                port = self.port,
                why,
                %error,
                "TLS certificates not reloaded; still serving the previous ones"
            ),
        }
    }

    fn lock_stamp(&self) -> std::sync::MutexGuard<'_, Stamp> {
        self.stamp.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches the files (and SIGHUP) until every other holder of `tls` is gone (the port
    /// stopped serving).
    pub fn spawn_watcher(tls: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(tls);
        tokio::spawn(watch(weak))
    }
}

async fn watch(tls: Weak<ReloadingTls>) {
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(error) => {
            tracing::warn!(%error, "no SIGHUP handler: TLS reloads on file changes only");
            None
        }
    };
    let mut poll = tokio::time::interval(RELOAD_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let signalled = tokio::select! {
            _ = poll.tick() => false,
            Some(()) = async { hangup.as_mut()?.recv().await } => true,
        };
        let Some(tls) = tls.upgrade() else { return };
        if signalled {
            tls.reload_logged("SIGHUP");
        } else {
            tls.reload_if_changed();
        }
    }
}

fn stamp_of(paths: &[PathBuf]) -> Stamp {
    paths
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
        })
        .collect()
}
