//! Fault windows: when the nemesis had a fault in force.
//!
//! Plots shade them and results count them. A window runs from a starting nemesis entry to its
//! matching ending one: `:start-X` to `:stop-X`, `:kill` to `:start`/`:restart`, `:pause` to
//! `:resume`, a clock fault (`:clock-skew`, `:bump-clock`, `:strobe-clock`, `:skew-clock`) to
//! `:reset-clock` (or `:clock-reset`), `:remove-node` to `:add-node`, `:power-loss` to
//! `:power-on`, `:bitflip` to `:bitflip-restart`. A window still open at the end of the
//! history lasts to its end. Any other nemesis `:f` (`:membership`, `:leave`, ...) is a
//! point event. Jepsen logs a nemesis operation twice (invocation and completion,
//! both `:info`); a repeat of the previous nemesis entry's `:f` is folded into the same window
//! or event.

use std::collections::HashMap;

use super::op::{Op, Process};

/// One fault in force over an interval of the test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    /// The fault family (`"partition"`, `"kill"`, `"pause"`, `"clock"`, or the `:f` of a point
    /// event).
    pub kind: String,
    /// Time the fault began (ns).
    pub start: i64,
    /// Time it ended (ns); `None` when it was still in force at the end of the history.
    pub end: Option<i64>,
    /// The nemesis `:value` of the entry that began it, as EDN text.
    pub description: String,
    /// True for a point event (no matching end entry by nature).
    pub point: bool,
}

/// How a nemesis `:f` relates to a fault window.
#[derive(Debug, PartialEq, Eq)]
enum Role {
    Start(String),
    End(String),
    Point,
}

fn role(f: &str) -> Role {
    if let Some(kind) = f.strip_prefix("start-") {
        return Role::Start(kind.to_string());
    }
    if let Some(kind) = f.strip_prefix("stop-") {
        return Role::End(kind.to_string());
    }
    match f {
        "kill" | "crash" => Role::Start("kill".into()),
        "start" | "restart" => Role::End("kill".into()),
        "pause" => Role::Start("pause".into()),
        "resume" => Role::End("pause".into()),
        "clock-skew" | "bump-clock" | "strobe-clock" | "skew-clock" => Role::Start("clock".into()),
        "reset-clock" | "clock-reset" => Role::End("clock".into()),
        "remove-node" => Role::Start("membership".into()),
        "add-node" => Role::End("membership".into()),
        "power-loss" => Role::Start("power-loss".into()),
        "power-on" => Role::End("power-loss".into()),
        "bitflip" => Role::Start("bitflip".into()),
        "bitflip-restart" => Role::End("bitflip".into()),
        "partition" => Role::Start("partition".into()),
        "heal" => Role::End("partition".into()),
        _ => Role::Point,
    }
}

/// Scans the nemesis entries of a history for fault windows.
#[derive(Default)]
struct Scanner {
    windows: Vec<FaultWindow>,
    open: HashMap<String, usize>,
    /// The `:f` of the previous nemesis entry and the window it touched.
    previous: Option<(String, usize)>,
}

impl Scanner {
    fn entry(&mut self, op: &Op) {
        let f = op.f.name().to_string();
        let repeat = self
            .previous
            .as_ref()
            .filter(|(pf, _)| *pf == f)
            .map(|p| p.1);
        let touched = match (role(&f), repeat) {
            (Role::End(kind), Some(w)) if !self.open.contains_key(&kind) => self.extend(w, op),
            (Role::Point, Some(w)) => self.extend(w, op),
            (Role::Start(kind), _) => self.start(kind, op, false),
            (Role::Point, None) => self.start(f.clone(), op, true),
            (Role::End(kind), _) => self.end(&kind, op),
        };
        self.previous = touched.map(|w| (f, w));
    }

    fn start(&mut self, kind: String, op: &Op, point: bool) -> Option<usize> {
        if let Some(&w) = self.open.get(&kind) {
            return Some(w);
        }
        self.windows.push(FaultWindow {
            kind: kind.clone(),
            start: op.time,
            end: point.then_some(op.time),
            description: op.value.to_string(),
            point,
        });
        let w = self.windows.len() - 1;
        if !point {
            self.open.insert(kind, w);
        }
        Some(w)
    }

    fn end(&mut self, kind: &str, op: &Op) -> Option<usize> {
        let w = self.open.remove(kind)?;
        self.windows[w].end = Some(op.time);
        Some(w)
    }

    fn extend(&mut self, w: usize, op: &Op) -> Option<usize> {
        self.windows[w].end = Some(op.time);
        Some(w)
    }
}

/// The fault windows of `ops`, in order of start.
pub fn fault_windows(ops: &[Op]) -> Vec<FaultWindow> {
    let mut scanner = Scanner::default();
    for op in ops.iter().filter(|op| op.process == Process::Nemesis) {
        scanner.entry(op);
    }
    scanner.windows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::value::Value;

    fn nem(f: &str, t: i64) -> Op {
        Op::nemesis(f, Value::Nil).at(t)
    }

    #[test]
    fn pairs_starts_with_stops_and_folds_jepsen_double_entries() {
        let ops = [
            nem("start-partition", 10),
            nem("start-partition", 12),
            nem("kill", 20),
            nem("stop-partition", 30),
            nem("stop-partition", 31),
            nem("start", 40),
            nem("membership", 50),
            nem("membership", 55),
            nem("pause", 60),
        ];
        let w = fault_windows(&ops);
        let summary: Vec<_> = w
            .iter()
            .map(|w| (w.kind.as_str(), w.start, w.end, w.point))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("partition", 10, Some(31), false),
                ("kill", 20, Some(40), false),
                ("membership", 50, Some(55), true),
                ("pause", 60, None, false),
            ]
        );
    }

    #[test]
    fn a_stray_stop_opens_nothing() {
        assert!(fault_windows(&[nem("stop-partition", 5)]).is_empty());
    }
}
