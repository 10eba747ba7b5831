//! `Backup.SaveSnapshot`: a backup of a node's state, as the stream of messages the node
//! sends (header, the file's bytes, trailer).
//!
//! Why the SDK hands the messages over instead of writing a file: where the bytes go (a
//! file written atomically, an object store, a pipe) is the caller's decision, and so is
//! what to check; `idemctl snapshot save` writes a file and checks the digest.

use idem_proto::v1::backup_client::BackupClient;
use idem_proto::v1::{SaveSnapshotRequest, SaveSnapshotResponse};
use idem_proto::{reason, status};
use tonic::{Code, Status, Streaming};

use super::Client;
use crate::error::ClientError;
use crate::transport::{Kind, Route};

/// The messages of one backup being streamed from a node.
pub struct SnapshotStream {
    inner: Streaming<SaveSnapshotResponse>,
}

impl SnapshotStream {
    /// The next message, `None` after the last; a failure mid-stream is the node's error
    /// (e.g. `OVERLOADED` while the node installs a snapshot) or a transport error.
    pub async fn next(&mut self) -> Result<Option<SaveSnapshotResponse>, ClientError> {
        self.inner.message().await.map_err(|s| stream_error(&s))
    }
}

impl Client {
    /// Starts a backup on the first endpoint that answers (any node can serve one: it reads
    /// at the leader's read index). Needs the admin role. The request timeout bounds the
    /// start of the stream, not its length.
    pub async fn save_snapshot(&self) -> Result<SnapshotStream, ClientError> {
        let inner = self
            .transport
            .call(
                Kind::Read,
                Route::Default,
                self.timeout(),
                |channel| async move {
                    BackupClient::new(channel)
                        .save_snapshot(SaveSnapshotRequest {})
                        .await
                },
            )
            .await?;
        Ok(SnapshotStream { inner })
    }
}

/// A status received mid-stream, as a definite error (nothing to retry inside a stream:
/// the caller starts a new backup).
fn stream_error(status: &Status) -> ClientError {
    let why = status::reason_of(status);
    let message = status.message().to_owned();
    match status.code() {
        Code::Unavailable if why.is_none() => ClientError::Unavailable { message },
        code => ClientError::Rejected {
            reason: why.unwrap_or_else(|| reason::INTERNAL.to_owned()),
            code,
            message,
            retry_after: status::retry_after(status),
        },
    }
}
