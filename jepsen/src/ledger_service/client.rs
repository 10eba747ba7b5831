//! The workers' side of the ledger service.

use std::time::Duration;

use anyhow::bail;

use crate::http;

/// Calls a [`super::LedgerService`].
#[derive(Debug, Clone)]
pub struct LedgerClient {
    addr: String,
    timeout: Duration,
}

impl LedgerClient {
    /// A client of the service at `addr`, each call bounded by `timeout`.
    pub fn new(addr: &str, timeout: Duration) -> LedgerClient {
        LedgerClient {
            addr: addr.to_string(),
            timeout,
        }
    }

    /// Executes the side effect of `operation_id` for `key`; true when the downstream had
    /// already executed it (a duplicate, no effect).
    pub async fn execute(
        &self,
        key: &str,
        operation_id: &str,
        fence: Option<u64>,
        process: u64,
    ) -> anyhow::Result<bool> {
        let fence = fence.map(|f| f.to_string()).unwrap_or_default();
        let path = format!(
            "/execute?key={key}&operation_id={operation_id}&fence={fence}&process={process}"
        );
        match self.call("POST", &path).await?.as_str() {
            "executed" => Ok(false),
            "duplicate" => Ok(true),
            other => bail!("ledger: unexpected answer {other:?}"),
        }
    }

    /// True when `operation_id` was executed (the "check the remote first" query).
    pub async fn executed(&self, operation_id: &str) -> anyhow::Result<bool> {
        let answer = self
            .call("GET", &format!("/executed?operation_id={operation_id}"))
            .await?;
        Ok(answer == "true")
    }

    async fn call(&self, method: &str, path: &str) -> anyhow::Result<String> {
        let (status, body) = http::request(&self.addr, method, path, self.timeout).await?;
        if status != 200 {
            bail!("ledger: {method} {path}: {status} {body}");
        }
        Ok(body)
    }
}
