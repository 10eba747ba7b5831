//! One verdict of the scenario: a named expectation, whether it held, and what was seen.

use serde::Serialize;

/// A check of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The step it belongs to (`latency`, `replay`, `race`, `isolation`, `history`).
    pub step: String,
    /// What was expected, as a sentence.
    pub name: String,
    /// True when it held.
    pub passed: bool,
    /// What was observed.
    pub detail: String,
}
