//! `idemctl cert create-ca|node|client`: throwaway certificates for tests and local
//! clusters (rcgen), written as PEM files.
//!
//! A production cluster takes its certificates from the organisation's PKI; these exist so
//! that `deploy/local/cluster.sh up --tls` and the tests can run TLS end to end without
//! OpenSSL. The CA's certificate and key live in `--dir` as `ca.pem` and `ca-key.pem`; each
//! issued certificate is `NAME.pem` with its key `NAME-key.pem` (mode 0600) beside it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::cli::{CertCommand, CertNodeArgs};
use crate::error::CliError;
use crate::output::Doc;

/// The CA certificate's file name in `--dir`.
const CA_CERT: &str = "ca.pem";
/// The CA key's file name in `--dir`.
const CA_KEY: &str = "ca-key.pem";

/// Runs one `idemctl cert` command.
pub fn run(command: &CertCommand) -> Result<Doc, CliError> {
    match command {
        CertCommand::CreateCa(args) => create_ca(&args.dir, &args.name),
        CertCommand::Node(args) => node(args),
        CertCommand::Client(args) => issue(&args.dir, &args.name, Vec::new(), Usage::Client),
    }
}

fn usage(e: impl std::fmt::Display) -> CliError {
    CliError::Usage(e.to_string())
}

/// A self-signed CA that may sign node and client certificates.
fn create_ca(dir: &Path, name: &str) -> Result<Doc, CliError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(usage)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().map_err(usage)?;
    let cert = params.self_signed(&key).map_err(usage)?;
    let cert_path = write(dir, CA_CERT, &cert.pem(), false)?;
    let key_path = write(dir, CA_KEY, &key.serialize_pem(), true)?;
    Ok(Doc::new()
        .with("name", name)
        .with("cert", cert_path.display().to_string())
        .with("key", key_path.display().to_string()))
}

/// A node certificate: server and client (it dials its peers), naming its DNS names and
/// IP addresses (clients and peers verify the address they dial against them).
fn node(args: &CertNodeArgs) -> Result<Doc, CliError> {
    let mut names = Vec::new();
    for dns in &args.dns {
        let dns = dns.clone().try_into().map_err(usage)?;
        names.push(SanType::DnsName(dns));
    }
    names.extend(args.ip.iter().copied().map(SanType::IpAddress));
    if names.is_empty() {
        return Err(CliError::Usage(
            "a node certificate needs at least one --dns or --ip (the names clients and peers dial)"
                .into(),
        ));
    }
    issue(&args.dir, &args.name, names, Usage::Node)
}

/// What a certificate is for.
#[derive(Clone, Copy)]
enum Usage {
    Node,
    Client,
}

/// Signs `NAME.pem` (CN = `name`, SANs `names`) with the CA of `dir`.
fn issue(dir: &Path, name: &str, names: Vec<SanType>, use_: Usage) -> Result<Doc, CliError> {
    if name.is_empty() || name.contains('/') {
        return Err(CliError::Usage(format!(
            "--name {name:?}: must be a non-empty file name"
        )));
    }
    let issuer = ca(dir)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(usage)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.subject_alt_names = names;
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = match use_ {
        Usage::Node => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    let key = KeyPair::generate().map_err(usage)?;
    let cert = params.signed_by(&key, &issuer).map_err(usage)?;
    let cert_path = write(dir, &format!("{name}.pem"), &cert.pem(), false)?;
    let key_path = write(dir, &format!("{name}-key.pem"), &key.serialize_pem(), true)?;
    let sans: Vec<String> = params
        .subject_alt_names
        .iter()
        .map(|san| match san {
            SanType::DnsName(dns) => dns.as_str().to_owned(),
            SanType::IpAddress(ip) => ip.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    Ok(Doc::new()
        .with("name", name)
        .with("sans", sans.join(","))
        .with("cert", cert_path.display().to_string())
        .with("key", key_path.display().to_string()))
}

/// The CA of `dir` (from `create-ca`).
fn ca(dir: &Path) -> Result<Issuer<'static, KeyPair>, CliError> {
    let read = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).map_err(|e| {
            CliError::Usage(format!(
                "{}: {e} (create the CA first: idemctl cert create-ca --dir {})",
                path.display(),
                dir.display()
            ))
        })
    };
    let key = KeyPair::from_pem(&read(CA_KEY)?).map_err(usage)?;
    Issuer::from_ca_cert_pem(&read(CA_CERT)?, key).map_err(usage)
}

/// Writes `contents` to `dir/file` (a key readable by its owner only).
fn write(dir: &Path, file: &str, contents: &str, secret: bool) -> Result<PathBuf, CliError> {
    std::fs::create_dir_all(dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let path = dir.join(file);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if secret {
        options.mode(0o600);
    }
    options
        .open(&path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::cli::{CertClientArgs, CertNameArgs};

    fn node_args(dir: &Path, dns: &[&str], ip: &[&str]) -> CertNodeArgs {
        CertNodeArgs {
            dir: dir.to_owned(),
            name: "node1".into(),
            dns: dns.iter().map(|d| (*d).to_owned()).collect(),
            ip: ip.iter().map(|i| i.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn a_ca_issues_node_and_client_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        run(&CertCommand::CreateCa(CertNameArgs {
            dir: d.to_owned(),
            name: "test CA".into(),
        }))
        .unwrap();
        let node = node_args(d, &["localhost"], &["127.0.0.1"]);
        let issued = run(&CertCommand::Node(node)).unwrap();
        run(&CertCommand::Client(CertClientArgs {
            dir: d.to_owned(),
            name: "admin".into(),
        }))
        .unwrap();

        // The node certificate names what clients and peers dial, and is a certificate.
        let json = crate::output::to_json(&issued);
        assert!(json.contains(r#""sans":"localhost,127.0.0.1""#), "{json}");
        let pem = std::fs::read_to_string(d.join("node1.pem")).unwrap();
        let key = KeyPair::from_pem(&std::fs::read_to_string(d.join("node1-key.pem")).unwrap());
        assert!(Issuer::from_ca_cert_pem(&pem, key.unwrap()).is_ok());
        for key in ["ca-key.pem", "node1-key.pem", "admin-key.pem"] {
            let mode = std::fs::metadata(d.join(key)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        assert!(d.join("admin.pem").is_file());
    }

    #[test]
    fn a_node_certificate_needs_a_name_and_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        let nameless = run(&CertCommand::Node(node_args(dir.path(), &[], &[])));
        assert!(matches!(nameless, Err(CliError::Usage(_))));
        let without_ca = run(&CertCommand::Node(node_args(dir.path(), &["n1"], &[])));
        match without_ca {
            Err(CliError::Usage(message)) => assert!(message.contains("create-ca"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}
