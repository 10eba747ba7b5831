//! The HTTP check: `GET` a URL made from a template with the operation id, read the answer
//! at a JSON pointer.
//!
//! Most providers that take an idempotency key can be asked about it, either as a lookup
//! (`GET /charges/{key}`: 200 with the charge, or 404) or as a search
//! (`GET /charges?idempotency_key={key}`: a list, empty when nothing ran). The template and
//! the mapping below cover both without code:
//!
//! - an HTTP status listed in [`HttpCheckConfig::absent_statuses`] (default 404) is *absent*;
//! - any other non-2xx status is a check error (a 500 or 429 says nothing about the charge);
//! - on 2xx, with a [`status_pointer`](HttpCheckConfig::status_pointer), its value decides:
//!   one of `found_values` is *found* (the reference is read at `reference_pointer`), one of
//!   `absent_values` is *absent*, anything else *unknown*;
//! - without one, a non-empty value at `reference_pointer` is *found*; a missing one is
//!   *unknown*, or *absent* when [`missing_means_absent`](HttpCheckConfig::missing_means_absent)
//!   says the search answers an empty list for an operation that never ran.
//!
//! One connection per check (the reconciler is rate-limited to a few checks a second), HTTP/1.1
//! over TCP or rustls; answers are bounded in size and time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper_util::rt::TokioIo;
use idem_core::OperationId;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::check::{CheckFuture, Remote, RemoteCheck};
use super::error::{CheckError, ConfigError};

/// The placeholder replaced by the operation id in templates and command arguments.
pub const OPERATION_ID: &str = "{operation_id}";

/// The CA bundle used for `https://` templates without [`HttpCheckConfig::ca_file`] (Debian's).
pub const SYSTEM_CA_FILE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Largest answer read, by default.
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;

/// How an [`HttpCheck`] asks and reads the answer.
#[derive(Clone, Debug)]
pub struct HttpCheckConfig {
    /// The URL, `http://` or `https://`, with `{operation_id}` somewhere in it.
    pub template: String,
    /// JSON pointer (RFC 6901) to the downstream's reference, e.g. `/id` or `/data/0/id`.
    pub reference_pointer: String,
    /// JSON pointer to a status value that decides found/absent, if the answer has one.
    pub status_pointer: Option<String>,
    /// Values at `status_pointer` that mean the operation executed, e.g. `succeeded`.
    pub found_values: Vec<String>,
    /// Values at `status_pointer` that mean it definitely did not, e.g. `not_found`.
    pub absent_values: Vec<String>,
    /// HTTP statuses that mean "no such operation" (default 404).
    pub absent_statuses: Vec<u16>,
    /// Without `status_pointer`: a 2xx answer with nothing at `reference_pointer` is absent
    /// (a search answering an empty list) instead of unknown.
    pub missing_means_absent: bool,
    /// Extra request headers, e.g. `authorization: Bearer ...`.
    pub headers: Vec<(String, String)>,
    /// CA certificates (PEM) for `https://`; default [`SYSTEM_CA_FILE`].
    pub ca_file: Option<PathBuf>,
    /// Time allowed for one check, connection included.
    pub timeout: Duration,
    /// Largest answer body read.
    pub max_body: usize,
}

impl HttpCheckConfig {
    /// A lookup of `template` reading the reference at `reference_pointer`, with the
    /// defaults: 404 is absent, 10 s, 64 KiB.
    pub fn new(template: impl Into<String>, reference_pointer: impl Into<String>) -> Self {
        HttpCheckConfig {
            template: template.into(),
            reference_pointer: reference_pointer.into(),
            status_pointer: None,
            found_values: Vec::new(),
            absent_values: Vec::new(),
            absent_statuses: vec![404],
            missing_means_absent: false,
            headers: Vec::new(),
            ca_file: None,
            timeout: Duration::from_secs(10),
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// A [`RemoteCheck`] over HTTP GET.
#[derive(Clone)]
pub struct HttpCheck {
    config: HttpCheckConfig,
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for HttpCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCheck")
            .field("config", &self.config)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl HttpCheck {
    /// Validates the configuration (template, pointers, CA file).
    pub fn new(config: HttpCheckConfig) -> Result<Self, ConfigError> {
        let sample = url_for(&config.template, &OperationId::generate())?;
        for pointer in std::iter::once(&config.reference_pointer).chain(&config.status_pointer) {
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(ConfigError::Pointer(pointer.clone()));
            }
        }
        let tls = match sample.scheme_str() {
            Some("https") => Some(tls_connector(config.ca_file.as_ref())?),
            _ => None,
        };
        Ok(HttpCheck { config, tls })
    }

    async fn ask(&self, operation_id: &OperationId) -> Result<Remote, CheckError> {
        let url = url_for(&self.config.template, operation_id)
            .map_err(|e| CheckError::Unexpected(e.to_string()))?;
        let limit = self.config.timeout;
        let (status, body) = tokio::time::timeout(limit, self.fetch(&url))
            .await
            .map_err(|_| CheckError::Timeout(limit))??;
        interpret(&self.config, status, &body)
    }

    async fn fetch(&self, url: &Uri) -> Result<(u16, Bytes), CheckError> {
        let host = url.host().unwrap_or_default().to_owned();
        let port = url
            .port_u16()
            .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
        let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| CheckError::Connect(e.to_string()))?;
        let request = self.request(url)?;
        match &self.tls {
            None => exchange(tcp, request, self.config.max_body).await,
            Some(tls) => {
                let name = ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
                    .map_err(|e| CheckError::Tls(e.to_string()))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| CheckError::Tls(e.to_string()))?;
                exchange(stream, request, self.config.max_body).await
            }
        }
    }

    fn request(&self, url: &Uri) -> Result<Request<Empty<Bytes>>, CheckError> {
        let authority = url.authority().map(|a| a.as_str()).unwrap_or_default();
        let path = url.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut builder = Request::get(path)
            .header(http::header::HOST, authority)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, "idem-reconciler");
        for (name, value) in &self.config.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        builder
            .body(Empty::new())
            .map_err(|e| CheckError::Unexpected(format!("bad request header: {e}")))
    }
}

impl RemoteCheck for HttpCheck {
    fn check<'a>(&'a self, operation_id: &'a OperationId) -> CheckFuture<'a> {
        Box::pin(self.ask(operation_id))
    }

    fn kind(&self) -> &'static str {
        "http"
    }
}

/// A JSON pointer from a pointer (`/data/0/id`, kept) or a simple path (`data.0.id`,
/// `$.data[0].id`): names separated by dots, array indexes as `[n]` or `.n`.
pub fn json_pointer(path: &str) -> Result<String, ConfigError> {
    if path.is_empty() || path.starts_with('/') {
        return Ok(path.to_owned());
    }
    let body = path.strip_prefix('$').unwrap_or(path);
    let body = body.strip_prefix('.').unwrap_or(body);
    let mut pointer = String::new();
    for part in body.replace('[', ".").replace(']', "").split('.') {
        if part.is_empty() || part.contains(['~', '/', '*', '?', '(', '\'', '"']) {
            return Err(ConfigError::Pointer(path.to_owned()));
        }
        pointer.push('/');
        pointer.push_str(part);
    }
    Ok(pointer)
}

/// The template with the operation id in place, as a URL.
fn url_for(template: &str, operation_id: &OperationId) -> Result<Uri, ConfigError> {
    if !template.contains(OPERATION_ID) {
        return Err(ConfigError::Template(format!("no {OPERATION_ID} in it")));
    }
    let url: Uri = template
        .replace(OPERATION_ID, &operation_id.to_string())
        .parse()
        .map_err(|e: http::uri::InvalidUri| ConfigError::Template(e.to_string()))?;
    match (url.scheme_str(), url.host()) {
        (Some("http" | "https"), Some(host)) if !host.is_empty() => Ok(url),
        _ => Err(ConfigError::Template(
            "expected http://HOST/... or https://HOST/...".into(),
        )),
    }
}

fn tls_connector(ca_file: Option<&PathBuf>) -> Result<TlsConnector, ConfigError> {
    let path = ca_file
        .cloned()
        .unwrap_or_else(|| PathBuf::from(SYSTEM_CA_FILE));
    let ca_error = |why: String| ConfigError::Ca {
        path: path.display().to_string(),
        why,
    };
    let bytes = std::fs::read(&path).map_err(|e| ca_error(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| ca_error(e.to_string()))?;
        roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ca_error("no CERTIFICATE block".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ca_error(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// One HTTP/1.1 request on `io`; the status and at most `max_body` bytes of the body.
async fn exchange<S>(
    io: S,
    request: Request<Empty<Bytes>>,
    max_body: usize,
) -> Result<(u16, Bytes), CheckError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| CheckError::Connect(e.to_string()))?;
    let driver = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| CheckError::Connect(e.to_string()));
    let outcome = match response {
        Ok(response) => {
            let status = response.status().as_u16();
            Limited::new(response.into_body(), max_body)
                .collect()
                .await
                .map(|body| (status, body.to_bytes()))
                .map_err(|e| match e.downcast::<LengthLimitError>() {
                    Ok(_) => CheckError::TooLarge(max_body),
                    Err(e) => CheckError::Connect(e.to_string()),
                })
        }
        Err(e) => Err(e),
    };
    driver.abort();
    outcome
}

/// What an answer means under the configured mapping.
pub(crate) fn interpret(
    config: &HttpCheckConfig,
    status: u16,
    body: &[u8],
) -> Result<Remote, CheckError> {
    if config.absent_statuses.contains(&status) {
        return Ok(Remote::Absent);
    }
    if !(200..300).contains(&status) {
        return Err(CheckError::Unexpected(format!("HTTP status {status}")));
    }
    let json: Value = serde_json::from_slice(body)
        .map_err(|e| CheckError::Unexpected(format!("the answer is not JSON: {e}")))?;
    let reference = json
        .pointer(&config.reference_pointer)
        .and_then(scalar)
        .filter(|r| !r.is_empty());
    let Some(status_pointer) = &config.status_pointer else {
        return Ok(match reference {
            Some(reference) => Remote::Found { reference },
            None if config.missing_means_absent => Remote::Absent,
            None => Remote::Unknown {
                why: format!("nothing at {}", config.reference_pointer),
            },
        });
    };
    let Some(value) = json.pointer(status_pointer).and_then(scalar) else {
        return Ok(Remote::Unknown {
            why: format!("nothing at {status_pointer}"),
        });
    };
    if config.found_values.contains(&value) {
        return Ok(match reference {
            Some(reference) => Remote::Found { reference },
            None => Remote::Unknown {
                why: format!("found, but nothing at {}", config.reference_pointer),
            },
        });
    }
    if config.absent_values.contains(&value) {
        return Ok(Remote::Absent);
    }
    Ok(Remote::Unknown {
        why: format!("the value at {status_pointer} is not mapped"),
    })
}

/// A string, number or boolean as text; anything else is no answer.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    fn found(reference: &str) -> Remote {
        Remote::Found {
            reference: reference.into(),
        }
    }

    #[test]
    fn lookup_mapping() {
        let config = HttpCheckConfig::new("http://p/charges/{operation_id}", "/id");
        let remote = interpret(&config, 200, br#"{"id":"psp_1","amount":5}"#).unwrap();
        assert_eq!(remote, found("psp_1"));
        assert_eq!(interpret(&config, 404, b"").unwrap(), Remote::Absent);
        assert!(matches!(
            interpret(&config, 200, br#"{"id":""}"#).unwrap(),
            Remote::Unknown { .. }
        ));
        assert!(matches!(
            interpret(&config, 503, b"busy"),
            Err(CheckError::Unexpected(_))
        ));
        assert!(matches!(
            interpret(&config, 200, b"<html>"),
            Err(CheckError::Unexpected(_))
        ));
    }

    #[test]
    fn search_and_status_mappings() {
        let mut config = HttpCheckConfig::new("http://p/c?k={operation_id}", "/data/0/id");
        assert!(matches!(
            interpret(&config, 200, br#"{"data":[]}"#).unwrap(),
            Remote::Unknown { .. }
        ));
        config.missing_means_absent = true;
        assert_eq!(
            interpret(&config, 200, br#"{"data":[]}"#).unwrap(),
            Remote::Absent
        );
        assert_eq!(
            interpret(&config, 200, br#"{"data":[{"id":7}]}"#).unwrap(),
            found("7")
        );
        config.status_pointer = Some("/data/0/status".into());
        config.found_values = vec!["succeeded".into()];
        config.absent_values = vec!["failed".into()];
        let body = |s: &str| format!(r#"{{"data":[{{"id":"ch_9","status":"{s}"}}]}}"#);
        let answer = |s: &str| interpret(&config, 200, body(s).as_bytes()).unwrap();
        assert_eq!(answer("succeeded"), found("ch_9"));
        assert_eq!(answer("failed"), Remote::Absent);
        assert!(matches!(answer("pending"), Remote::Unknown { .. }));
    }

    #[test]
    fn paths_become_pointers() {
        for (path, pointer) in [
            ("/data/0/id", "/data/0/id"),
            ("", ""),
            ("id", "/id"),
            ("data.0.id", "/data/0/id"),
            ("$.data[0].id", "/data/0/id"),
        ] {
            assert_eq!(json_pointer(path).unwrap(), pointer);
        }
        for bad in ["data..id", "$.data[*].id", "a.", "$"] {
            assert!(json_pointer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn configuration_is_checked() {
        let bad = |template: &str, pointer: &str| {
            HttpCheck::new(HttpCheckConfig::new(template, pointer)).is_err()
        };
        assert!(bad("http://p/charges", "/id"), "no placeholder");
        assert!(bad("ftp://p/{operation_id}", "/id"));
        assert!(bad("http://p/{operation_id}", "id"), "not a pointer");
        assert!(!bad("http://p/{operation_id}", "/id"));
        let mut https = HttpCheckConfig::new("https://p/{operation_id}", "/id");
        https.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(matches!(HttpCheck::new(https), Err(ConfigError::Ca { .. })));
    }

    /// A one-connection-at-a-time HTTP server on loopback answering `reply(path)`.
    async fn serve(reply: fn(&str) -> (u16, String)) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                let (status, body) = reply(&path);
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn asks_a_server_on_loopback() {
        let base = serve(|path| match path.strip_prefix("/charges/") {
            Some(id) => (200, format!(r#"{{"id":"psp_{}"}}"#, &id[..8])),
            None => (404, String::new()),
        })
        .await;
        let check = |path: &str| {
            HttpCheck::new(HttpCheckConfig::new(format!("{base}{path}"), "/id")).unwrap()
        };
        let id = OperationId::generate();
        let remote = check("/charges/{operation_id}").check(&id).await.unwrap();
        assert_eq!(remote, found(&format!("psp_{}", &id.to_string()[..8])));
        let remote = check("/refunds/{operation_id}").check(&id).await.unwrap();
        assert_eq!(remote, Remote::Absent);
        let big = serve(|_| (200, format!(r#"{{"id":"{}"}}"#, "x".repeat(200)))).await;
        let mut config = HttpCheckConfig::new(format!("{big}/{{operation_id}}"), "/id");
        config.max_body = 100;
        let check = HttpCheck::new(config).unwrap();
        assert!(matches!(
            check.check(&id).await,
            Err(CheckError::TooLarge(100))
        ));
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let check = HttpCheck::new(HttpCheckConfig::new(
            format!("http://{addr}/{{operation_id}}"),
            "/id",
        ))
        .unwrap();
        assert!(matches!(
            check.check(&id).await,
            Err(CheckError::Connect(_))
        ));
    }
}
