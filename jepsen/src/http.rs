//! A minimal HTTP/1.1 client and server, one request per connection.
//!
//! The harness speaks HTTP in two places: node health (`GET /healthz`) and the ledger service.
//! Both carry tiny bodies and their arguments in the query string, so a few dozen lines over
//! tokio's TCP replace a web stack, and `curl` still works against the ledger for debugging.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request or response head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// A parsed request: method, path and query parameters (no percent-decoding: the harness
/// only sends URL-safe values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path without the query.
    pub path: String,
    /// Query parameters.
    pub query: BTreeMap<String, String>,
}

/// Sends `method path` to `addr` and returns the status code and body, within `timeout`.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    timeout: Duration,
) -> anyhow::Result<(u16, String)> {
    tokio::time::timeout(timeout, exchange(addr, method, path))
        .await
        .map_err(|_| anyhow!("{method} http://{addr}{path}: no answer within {timeout:?}"))?
}

async fn exchange(addr: &str, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await?;
    parse_response(&buf)
}

/// Parses a full response: status code and body.
pub fn parse_response(buf: &[u8]) -> anyhow::Result<(u16, String)> {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("truncated HTTP response"))?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad HTTP status line"))?;
    Ok((status, body.to_string()))
}

/// Parses a request head (`GET /p?a=1 HTTP/1.1` and headers).
pub fn parse_request(head: &str) -> anyhow::Result<Request> {
    let line = head.lines().next().unwrap_or_default();
    let mut words = line.split_whitespace();
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        bail!("bad request line {line:?}");
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query,
    })
}

/// Serves requests on `listener` with `handler` (status and body) until the task is dropped.
pub async fn serve<H, Fut>(listener: TcpListener, handler: H)
where
    H: Fn(Request) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (u16, String)> + Send,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _ = handle(stream, handler).await;
        });
    }
}

async fn handle<H, Fut>(mut stream: TcpStream, handler: H) -> anyhow::Result<()>
where
    H: Fn(Request) -> Fut,
    Fut: Future<Output = (u16, String)>,
{
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX_HEAD {
            bail!("incomplete request");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (status, body) = match parse_request(&String::from_utf8_lossy(&buf)) {
        Ok(req) => handler(req).await,
        Err(e) => (400, format!("{e}\n")),
    };
    let reason = if status < 400 { "OK" } else { "Error" };
    let out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests_and_responses() {
        let r = parse_request("POST /execute?key=k1&fence=2 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/execute"));
        assert_eq!(r.query["key"], "k1");
        assert_eq!(r.query["fence"], "2");
        let (s, b) = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!((s, b.as_str()), (200, "ok"));
    }

    #[tokio::test]
    async fn round_trip_on_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(serve(listener, |req: Request| async move {
            (
                200,
                format!(
                    "{} {}",
                    req.method,
                    req.query.get("a").cloned().unwrap_or_default()
                ),
            )
        }));
        let (status, body) = request(&addr, "GET", "/x?a=7", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (200, "GET 7"));
        server.abort();
    }
}
