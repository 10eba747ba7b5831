//! The error of a command, and the process exit code it maps to.
//!
//! Scripts branch on the exit code before they parse anything, so the codes sort errors by
//! what the caller should do next:
//!
//! | code | meaning | what to do |
//! |---|---|---|
//! | 1 | the server refused the call (`STALE_FENCE`, `NOT_FOUND`, `VERSION_MISMATCH`, ...) | read the reason; do not repeat blindly |
//! | 2 | usage error or invalid input (clap errors, `INVALID_*`, a bad JSON body) | fix the command line |
//! | 3 | unavailable or outcome unknown | re-run the same command (same key, holder, fence) |

use std::time::Duration;

use idem_client::ClientError;

/// Exit code of a refusal.
pub const EXIT_REJECTED: u8 = 1;
/// Exit code of a usage error or invalid input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of an unavailable cluster or an unknown outcome.
pub const EXIT_UNAVAILABLE: u8 = 3;

/// Reason printed for command-line errors found by idemctl itself.
pub const USAGE: &str = "USAGE";

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The SDK or the server reported an error.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The command line is unusable (beyond what clap checks), e.g. an unreadable body file.
    #[error("{0}")]
    Usage(String),
    /// A backup could not be saved, read or restored (`idemctl snapshot`).
    #[error("{message}")]
    Backup {
        /// `BACKUP_DIGEST_MISMATCH`, `NOT_A_BACKUP`, `DATA_DIR_NOT_EMPTY` or `BACKUP_FAILED`.
        reason: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl CliError {
    /// The machine-readable reason (e.g. `STALE_FENCE`, `UNAVAILABLE`, `USAGE`).
    pub fn reason(&self) -> &str {
        match self {
            CliError::Client(e) => e.reason(),
            CliError::Usage(_) => USAGE,
            CliError::Backup { reason, .. } => reason,
        }
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        match self {
            CliError::Client(e) => e.message(),
            CliError::Usage(message) => message,
            CliError::Backup { message, .. } => message,
        }
    }

    /// The server's suggested wait before retrying, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CliError::Client(e) => e.retry_after(),
            CliError::Usage(_) | CliError::Backup { .. } => None,
        }
    }

    /// The process exit code (see the module table).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Client(ClientError::InvalidArgument { .. }) => {
                EXIT_USAGE
            }
            CliError::Client(ClientError::Unavailable { .. })
            | CliError::Client(ClientError::OutcomeUnknown { .. }) => EXIT_UNAVAILABLE,
            CliError::Client(_) | CliError::Backup { .. } => EXIT_REJECTED,
        }
    }
}

impl From<idem_store::BackupError> for CliError {
    fn from(error: idem_store::BackupError) -> Self {
        use idem_store::BackupError;
        let reason = match &error {
            BackupError::Digest { .. } => "BACKUP_DIGEST_MISMATCH",
            BackupError::Format(_) => "NOT_A_BACKUP",
            BackupError::NotEmpty(_) => "DATA_DIR_NOT_EMPTY",
            _ => "BACKUP_FAILED",
        };
        CliError::Backup {
            reason,
            message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        let rejected = CliError::from(ClientError::Rejected {
            reason: "STALE_FENCE".into(),
            code: idem_client::Code::FailedPrecondition,
            message: String::new(),
            retry_after: None,
        });
        assert_eq!(rejected.exit_code(), 1);
        let missing = CliError::from(ClientError::NotFound {
            message: String::new(),
        });
        assert_eq!(missing.exit_code(), 1);
        let invalid = CliError::from(ClientError::invalid("INVALID_KEY", "bad"));
        assert_eq!((invalid.exit_code(), invalid.reason()), (2, "INVALID_KEY"));
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        let unknown = CliError::from(ClientError::OutcomeUnknown {
            message: String::new(),
        });
        assert_eq!(unknown.exit_code(), 3);
        let down = CliError::from(ClientError::Unavailable {
            message: String::new(),
        });
        assert_eq!((down.exit_code(), down.reason()), (3, "UNAVAILABLE"));
    }
}
