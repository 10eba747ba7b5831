//! `GET /metrics` on a listen address, for the reconciler run as a daemon
//! (`idemctl reconcile run --watch --metrics-addr`): the Prometheus text of [`Metrics`], and
//! 404 for anything else. Nothing else is served, so it needs no authentication.

use std::convert::Infallible;
use std::future::Future;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::metrics::Metrics;

/// Serves `metrics` on `listener` until `shutdown` completes.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, metrics.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    metrics: Metrics,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = if request.method() == Method::GET && request.uri().path() == "/metrics" {
        (StatusCode::OK, metrics.render())
    } else {
        (StatusCode::NOT_FOUND, "not found\n".to_owned())
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn serves_the_text_format() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Metrics::new();
        metrics.conflict();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_metrics(listener, metrics, async {
            let _ = stopped.await;
        }));
        let answer = get(addr, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("idem_reconciler_conflicts_total 1"));
        assert!(get(addr, "/other").await.starts_with("HTTP/1.1 404"));
        stop.send(()).unwrap();
        server.await.unwrap();
    }
}
