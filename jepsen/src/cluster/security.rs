//! TLS and authentication of a harness cluster: a throwaway CA, one certificate per node,
//! a credentials file, and what each kind of client presents.
//!
//! A production cluster runs with TLS on both ports and authentication on, so the runs that
//! check the store's promises run that way too: a fault that breaks a TLS handshake, a peer
//! connection that must be re-established under mutual TLS after a partition, or a token
//! lookup on every call are then part of what the checkers see. Everything is issued by the
//! real `idemctl` (`cert create-ca|node`, `auth token create`), as an operator would, into
//! the run's directory; nothing is reused between runs.
//!
//! Two principals: an administrator (every tenant) for the harness's own status queries and
//! the membership nemesis, and a worker of the workload's tenant for the workers and the
//! final reads, so a worker call is authorised exactly as a service's would be.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};
use idem_client::{ClientOptions, TlsOptions};

use super::netns::Topology;

/// The name the CA gives itself.
const CA_NAME: &str = "idem jepsen CA";

/// Whether a cluster runs secure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityMode {
    /// Plaintext on both ports, authentication off.
    Plaintext,
    /// TLS on both ports, authentication on: certificates and tokens issued by `idemctl`,
    /// the workers' token bound to `tenant`.
    Secure {
        /// The idemctl binary.
        idemctl: PathBuf,
        /// The workload's tenant.
        tenant: String,
    },
}

/// The credentials of a secure cluster, under one directory.
#[derive(Debug, Clone)]
pub struct Security {
    dir: PathBuf,
    admin_token: String,
    worker_token: String,
}

/// What node `id` needs: its certificate and key (API and Raft port, and its client
/// certificate towards peers), the CA, and the credentials file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSecurity {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
    /// The cluster CA (PEM): peers and clients chain to it.
    pub ca: PathBuf,
    /// The credentials file (`[auth] credentials`).
    pub credentials: PathBuf,
}

/// What a client presents: TLS to the nodes and a bearer token, or nothing (plaintext, no
/// token: a cluster with authentication off).
#[derive(Debug, Clone, Default)]
pub struct Access {
    ca: Option<PathBuf>,
    token: Option<String>,
}

impl Security {
    /// Issues, with `idemctl`, a CA and a certificate for every node of `topology` (its
    /// address is what clients and peers dial), an admin token and a worker token of
    /// `tenant`, into `dir`.
    pub fn create(
        idemctl: &Path,
        dir: &Path,
        topology: &Topology,
        tenant: &str,
    ) -> anyhow::Result<Security> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Absolute, so the node configurations hold paths that work from anywhere.
        let dir = &dir.canonicalize()?;
        let d = dir.to_string_lossy();
        ctl(
            idemctl,
            &["cert", "create-ca", "--dir", &d, "--name", CA_NAME],
        )?;
        for id in topology.ids() {
            let ip = topology.node_ip(id).to_string();
            let name = Topology::node_name(id);
            ctl(
                idemctl,
                &["cert", "node", "--dir", &d, "--name", &name, "--ip", &ip],
            )?;
        }
        let credentials = dir.join("credentials.toml");
        let admin_token = token(idemctl, &credentials, "jepsen-admin", "admin", "*")?;
        let worker_token = token(idemctl, &credentials, "jepsen-worker", "worker", tenant)?;
        Ok(Security {
            dir: dir.to_path_buf(),
            admin_token,
            worker_token,
        })
    }

    /// The files node `id` is configured with.
    pub fn node(&self, id: usize) -> NodeSecurity {
        let name = Topology::node_name(id);
        NodeSecurity {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
            ca: self.ca(),
            credentials: self.dir.join("credentials.toml"),
        }
    }

    /// The administrator: status queries, membership changes.
    pub fn admin(&self) -> Access {
        Access {
            ca: Some(self.ca()),
            token: Some(self.admin_token.clone()),
        }
    }

    /// A worker of the workload's tenant.
    pub fn worker(&self) -> Access {
        Access {
            ca: Some(self.ca()),
            token: Some(self.worker_token.clone()),
        }
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

impl Access {
    /// True when the client speaks TLS.
    pub fn is_secure(&self) -> bool {
        self.ca.is_some()
    }

    /// `options` with this access's TLS and token.
    pub fn apply(&self, mut options: ClientOptions) -> ClientOptions {
        if let Some(ca) = &self.ca {
            options = options.tls(TlsOptions::with_ca(ca));
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        options
    }

    /// An `idemctl` command with this access: `--cacert`, and the token in `IDEMCTL_TOKEN`
    /// (never on the command line, where `ps` would show it).
    pub fn idemctl(&self, idemctl: &Path) -> Command {
        let mut command = Command::new(idemctl);
        if let Some(ca) = &self.ca {
            command.arg("--cacert").arg(ca);
        }
        match &self.token {
            Some(token) => command.env("IDEMCTL_TOKEN", token),
            None => command.env_remove("IDEMCTL_TOKEN"),
        };
        command
    }
}

/// Runs `idemctl ARGS`, failing with its output when it fails.
fn ctl(idemctl: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(idemctl)
        .args(["-w", "json"])
        .args(args)
        .output()
        .with_context(|| format!("running {}", idemctl.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "idemctl {}: exit {:?}: {stdout}{}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(stdout)
}

/// Creates token `name` in `credentials` and returns it.
fn token(
    idemctl: &Path,
    credentials: &Path,
    name: &str,
    role: &str,
    tenant: &str,
) -> anyhow::Result<String> {
    let file = credentials.to_string_lossy();
    let args = [
        "auth",
        "token",
        "create",
        "--credentials",
        &file,
        "--name",
        name,
        "--role",
        role,
        "--tenant",
        tenant,
    ];
    let out = ctl(idemctl, &args)?;
    let doc: serde_json::Value =
        serde_json::from_str(&out).with_context(|| format!("idemctl auth token create: {out}"))?;
    match doc.get("token").and_then(serde_json::Value::as_str) {
        Some(token) => Ok(token.to_owned()),
        None => bail!("idemctl auth token create printed no token: {out}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_access_adds_nothing() {
        let options = Access::default().apply(ClientOptions::default());
        assert_eq!(options, ClientOptions::default());
        assert!(!Access::default().is_secure());
    }

    #[test]
    fn secure_access_speaks_tls_with_its_token() {
        let access = Access {
            ca: Some("/run/ca.pem".into()),
            token: Some("idem_00".into()),
        };
        let options = access.apply(ClientOptions::default());
        assert_eq!(options.tls, Some(TlsOptions::with_ca("/run/ca.pem")));
        assert!(options.token.is_some());
        let command = access.idemctl(Path::new("/bin/idemctl"));
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, ["--cacert", "/run/ca.pem"]);
        assert!(command
            .get_envs()
            .any(|(k, v)| k == "IDEMCTL_TOKEN" && v == Some("idem_00".as_ref())));
    }
}
