//! The external-command check: run a program with the operation id as an argument and read
//! its exit code.
//!
//! For downstreams that only an existing tool can ask (a provider CLI, a SQL query in a
//! script). The program is started directly, never through a shell, so an operation id can
//! never be read as shell syntax; `{operation_id}` is replaced inside each argument. Its
//! answer:
//!
//! | exit code | meaning |
//! |---|---|
//! | 0 | found: stdout is the reference (its first line, trimmed; or a JSON object's `"reference"`) |
//! | 10 ([`ABSENT_EXIT`]) | definitely absent |
//! | 11 ([`UNKNOWN_EXIT`]) | the downstream cannot tell (left alone) |
//! | anything else, a signal, the time limit | a check error (left alone) |
//!
//! Exit codes 1 and 2 are deliberately *not* "absent": a crashing script exits with them,
//! and a crash must never be taken for "nothing happened". stdin is empty, stderr is
//! discarded, stdout is read up to a bound, and the process is killed at the time limit.

use std::process::Stdio;
use std::time::Duration;

use idem_core::OperationId;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::check::{CheckFuture, Remote, RemoteCheck};
use super::error::{CheckError, ConfigError};
use super::http_check::OPERATION_ID;

/// Exit code of a check command meaning "definitely absent".
pub const ABSENT_EXIT: i32 = 10;
/// Exit code of a check command meaning "the downstream cannot tell".
pub const UNKNOWN_EXIT: i32 = 11;
/// Largest stdout read, by default.
pub const DEFAULT_MAX_OUTPUT: usize = 4096;

/// A [`RemoteCheck`] that runs a program.
#[derive(Clone, Debug)]
pub struct CommandCheck {
    argv: Vec<String>,
    timeout: Duration,
    max_output: usize,
}

impl CommandCheck {
    /// The program and its arguments (at least one of them with `{operation_id}`), a time
    /// limit per run and the most stdout bytes read.
    pub fn new(
        argv: Vec<String>,
        timeout: Duration,
        max_output: usize,
    ) -> Result<Self, ConfigError> {
        match argv.first() {
            None => return Err(ConfigError::Command("no program".into())),
            Some(program) if program.contains(OPERATION_ID) => {
                return Err(ConfigError::Command(format!(
                    "{OPERATION_ID} must be an argument, not the program"
                )))
            }
            Some(_) => {}
        }
        if !argv.iter().any(|a| a.contains(OPERATION_ID)) {
            return Err(ConfigError::Command(format!("no {OPERATION_ID} argument")));
        }
        Ok(CommandCheck {
            argv,
            timeout,
            max_output,
        })
    }

    /// Splits `line` on whitespace into a program and arguments (no quoting, no shell).
    pub fn from_line(
        line: &str,
        timeout: Duration,
        max_output: usize,
    ) -> Result<Self, ConfigError> {
        CommandCheck::new(
            line.split_whitespace().map(str::to_owned).collect(),
            timeout,
            max_output,
        )
    }

    async fn run(&self, operation_id: &OperationId) -> Result<Remote, CheckError> {
        let id = operation_id.to_string();
        let mut child = Command::new(&self.argv[0])
            .args(self.argv[1..].iter().map(|a| a.replace(OPERATION_ID, &id)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CheckError::Command(format!("cannot start {}: {e}", self.argv[0])))?;
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let limit = self.max_output;
        let finished = async {
            let mut output = Vec::new();
            (&mut stdout)
                .take(limit as u64 + 1)
                .read_to_end(&mut output)
                .await
                .map_err(|e| CheckError::Command(e.to_string()))?;
            if output.len() > limit {
                return Err(CheckError::TooLarge(limit));
            }
            let status = child
                .wait()
                .await
                .map_err(|e| CheckError::Command(e.to_string()))?;
            Ok((status.code(), output))
        };
        let (code, output) = tokio::time::timeout(self.timeout, finished)
            .await
            .map_err(|_| CheckError::Timeout(self.timeout))??;
        interpret(code, &output)
    }
}

impl RemoteCheck for CommandCheck {
    fn check<'a>(&'a self, operation_id: &'a OperationId) -> CheckFuture<'a> {
        Box::pin(self.run(operation_id))
    }

    fn kind(&self) -> &'static str {
        "command"
    }
}

/// What an exit code and stdout mean.
fn interpret(code: Option<i32>, stdout: &[u8]) -> Result<Remote, CheckError> {
    match code {
        Some(0) => Ok(reference(stdout).map_or_else(
            || Remote::Unknown {
                why: "exit 0 without a reference on stdout".into(),
            },
            |reference| Remote::Found { reference },
        )),
        Some(ABSENT_EXIT) => Ok(Remote::Absent),
        Some(UNKNOWN_EXIT) => Ok(Remote::Unknown {
            why: format!("the command exited {UNKNOWN_EXIT}"),
        }),
        Some(other) => Err(CheckError::Command(format!("exit status {other}"))),
        None => Err(CheckError::Command("killed by a signal".into())),
    }
}

/// The reference on stdout: a JSON object's `"reference"`, else the first line, trimmed.
fn reference(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim();
    let found = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(object)) => object
            .get("reference")
            .and_then(|r| r.as_str())
            .map(str::to_owned),
        _ => text.lines().next().map(|l| l.trim().to_owned()),
    };
    found.filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell script in a temporary directory, run as `/bin/sh SCRIPT --key {operation_id}`
    /// (not executed itself: a file just written may still be open for writing in a child
    /// forked by a concurrent test, and exec would fail with "text file busy").
    fn check_script(dir: &tempfile::TempDir, body: &str, timeout: Duration) -> CommandCheck {
        let path = dir.path().join("check.sh");
        std::fs::write(&path, format!("{body}\n")).unwrap();
        let argv = [
            "/bin/sh",
            &path.display().to_string(),
            "--key",
            "{operation_id}",
        ];
        CommandCheck::new(
            argv.map(str::to_owned).to_vec(),
            timeout,
            DEFAULT_MAX_OUTPUT,
        )
        .unwrap()
    }

    #[test]
    fn exit_codes_and_stdout() {
        let found = |r: &str| Remote::Found {
            reference: r.into(),
        };
        assert_eq!(interpret(Some(0), b"psp_1\n").unwrap(), found("psp_1"));
        assert_eq!(
            interpret(Some(0), br#"{"reference":"psp_2","x":1}"#).unwrap(),
            found("psp_2")
        );
        assert!(matches!(
            interpret(Some(0), b"  \n").unwrap(),
            Remote::Unknown { .. }
        ));
        assert_eq!(interpret(Some(10), b"").unwrap(), Remote::Absent);
        assert!(matches!(
            interpret(Some(11), b"").unwrap(),
            Remote::Unknown { .. }
        ));
        assert!(interpret(Some(1), b"").is_err(), "a crash is not absent");
        assert!(interpret(None, b"").is_err());
    }

    #[test]
    fn configuration_is_checked() {
        let t = Duration::from_secs(1);
        assert!(CommandCheck::from_line("", t, 10).is_err());
        assert!(CommandCheck::from_line("/bin/check", t, 10).is_err());
        assert!(CommandCheck::from_line("{operation_id} x", t, 10).is_err());
        assert!(CommandCheck::from_line("/bin/check --id={operation_id}", t, 10).is_ok());
    }

    #[tokio::test]
    async fn runs_a_script_with_the_operation_id() {
        let dir = tempfile::tempdir().unwrap();
        // The script answers found with the id it was given, proving the substitution.
        let body = r#"[ "$1" = "--key" ] || exit 3; echo "psp-$2""#;
        let id = OperationId::generate();
        let remote = check_script(&dir, body, Duration::from_secs(5))
            .check(&id)
            .await
            .unwrap();
        let reference = format!("psp-{id}");
        assert_eq!(remote, Remote::Found { reference });
        let absent = check_script(&dir, "exit 10", Duration::from_secs(5));
        assert_eq!(absent.check(&id).await.unwrap(), Remote::Absent);
        let crashing = check_script(&dir, "exit 1", Duration::from_secs(5));
        assert!(crashing.check(&id).await.is_err());
    }

    #[tokio::test]
    async fn bounded_in_time_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let id = OperationId::generate();
        let slow = check_script(&dir, "exec sleep 30", Duration::from_millis(200));
        assert!(matches!(slow.check(&id).await, Err(CheckError::Timeout(_))));
        let chatty = check_script(&dir, "yes psp_1 | head -c 100000", Duration::from_secs(5));
        assert!(matches!(
            chatty.check(&id).await,
            Err(CheckError::TooLarge(_))
        ));
        let argv = vec!["/nonexistent/check".to_owned(), "{operation_id}".to_owned()];
        let missing = CommandCheck::new(argv, Duration::from_secs(1), 10).unwrap();
        assert!(matches!(
            missing.check(&id).await,
            Err(CheckError::Command(_))
        ));
    }
}
