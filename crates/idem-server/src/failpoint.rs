//! Crash failpoints for fault-injection tests: `IDEM_FAILPOINTS=claim.after_commit,…`.
//!
//! A failpoint aborts the process (`std::process::abort`, no unwinding, no flush: what
//! `kill -9` does) at an exact point of the write path, so black-box tests can prove that
//! nothing acknowledged is lost and nothing runs twice across a crash on either side of a
//! commit. The points are `<command>.before_commit` (before the command is proposed: it
//! never reaches the log) and `<command>.after_commit` (after it was committed and applied,
//! before the reply), where `<command>` is a core command name (`claim`, `complete`, `fail`,
//! `expire`, …).
//!
//! Unset (the normal case) the check is one branch on an empty set. A node with armed
//! failpoints says so loudly in its log at start.

use std::collections::BTreeSet;

/// The environment variable that arms failpoints (comma-separated point names).
pub const ENV: &str = "IDEM_FAILPOINTS";

/// Where in the write path a failpoint sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the command is proposed to Raft.
    BeforeCommit,
    /// After the command committed and applied, before the reply.
    AfterCommit,
}

impl Phase {
    fn suffix(self) -> &'static str {
        match self {
            Phase::BeforeCommit => "before_commit",
            Phase::AfterCommit => "after_commit",
        }
    }
}

/// The armed failpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failpoints {
    armed: BTreeSet<String>,
}

impl Failpoints {
    /// Parses a comma-separated list of point names.
    pub fn parse(spec: &str) -> Self {
        Failpoints {
            armed: spec
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The failpoints armed by [`ENV`] in the process environment.
    pub fn from_env() -> Self {
        std::env::var(ENV).map_or_else(|_| Failpoints::default(), |spec| Self::parse(&spec))
    }

    /// True when no failpoint is armed.
    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }

    /// The armed point names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.armed.iter().map(String::as_str)
    }

    /// True when `<command>.<phase>` is armed.
    pub fn is_armed(&self, command: &str, phase: Phase) -> bool {
        !self.armed.is_empty()
            && self
                .armed
                .contains(&format!("{command}.{}", phase.suffix()))
    }

    /// Aborts the process if `<command>.<phase>` is armed.
    pub fn check(&self, command: &str, phase: Phase) {
        if self.is_armed(command, phase) {
            eprintln!(
                "idemd: failpoint {command}.{} reached: aborting",
                phase.suffix()
            );
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches_points() {
        let points = Failpoints::parse(" claim.after_commit, complete.before_commit ,,");
        assert!(points.is_armed("claim", Phase::AfterCommit));
        assert!(points.is_armed("complete", Phase::BeforeCommit));
        assert!(!points.is_armed("claim", Phase::BeforeCommit));
        assert!(!points.is_armed("fail", Phase::AfterCommit));
        assert_eq!(points.names().count(), 2);
        assert!(Failpoints::parse("").is_empty());
    }
}
