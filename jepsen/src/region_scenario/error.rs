//! Why the region scenario could not run.
//!
//! A check that fails is a result, recorded in the report (exit status 1); these errors are
//! the other kind: the scenario could not set up or observe what it needs to judge anything
//! (exit status 2), or it was interrupted (130). A phase that fails half-way is reported as a
//! failed check carrying this error's text, and the phases after it are skipped.

use std::path::PathBuf;
use std::time::Duration;

use idem_client::ClientError;

/// What stopped the scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Building, starting, partitioning or healing the emulated cluster failed (the shared
    /// cluster code reports with `anyhow`).
    #[error("cluster: {0:#}")]
    Cluster(anyhow::Error),
    /// An admin call the scenario depends on failed (region add, mode, tenant bind).
    #[error("{what}: {source}")]
    Admin {
        /// The call.
        what: String,
        /// The client's error.
        #[source]
        source: ClientError,
    },
    /// A state the scenario waits for did not come.
    #[error("{what}: not within {within:?} (last seen: {last})")]
    Timeout {
        /// The state waited for.
        what: String,
        /// How long it was waited for.
        within: Duration,
        /// What the last probe saw.
        last: String,
    },
    /// A request could not be built (an invalid key or scope: a bug of the scenario).
    #[error("building a request: {0}")]
    Request(String),
    /// A measurement could not be taken (e.g. a node's metrics page did not answer).
    #[error("{0}")]
    Observation(String),
    /// Writing the report or the history.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Recording or reading the history.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    /// SIGINT or SIGTERM.
    #[error("interrupted by {0}")]
    Interrupted(&'static str),
}

impl From<anyhow::Error> for ScenarioError {
    fn from(error: anyhow::Error) -> Self {
        ScenarioError::Cluster(error)
    }
}

impl ScenarioError {
    /// An [`ScenarioError::Admin`] error for `what`.
    pub fn admin(what: impl Into<String>) -> impl FnOnce(ClientError) -> ScenarioError {
        let what = what.into();
        move |source| ScenarioError::Admin { what, source }
    }
}
