//! The sequential model: a key's completion as a write-once register.
//!
//! A key is either not completed (`None`) or completed with a result (`Some(v)`, results interned
//! as small integers). `complete(v)` moves `None` to `Some(v)` and is an idempotent no-op on
//! `Some(v)`; on `Some(w)` with `w != v` it cannot succeed. An observation (a read, or a claim
//! whose outcome reveals the state) succeeds only if it matches the state.

/// The register's state: the interned result, or `None` while not completed.
pub type State = Option<u32>;

/// What an operation does to, or sees of, the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `complete(v)`.
    Write(u32),
    /// An observation of the state.
    Observe(State),
}

/// The state after applying `action` to `state`, or `None` if the model forbids it.
pub fn step(state: State, action: Action) -> Option<State> {
    match (state, action) {
        (None, Action::Write(v)) => Some(Some(v)),
        (Some(w), Action::Write(v)) if w == v => Some(state),
        (_, Action::Write(_)) => None,
        (s, Action::Observe(seen)) if s == seen => Some(state),
        (_, Action::Observe(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_once_register() {
        assert_eq!(step(None, Action::Write(1)), Some(Some(1)));
        assert_eq!(step(Some(1), Action::Write(1)), Some(Some(1)));
        assert_eq!(step(Some(1), Action::Write(2)), None);
        assert_eq!(step(None, Action::Observe(None)), Some(None));
        assert_eq!(step(Some(1), Action::Observe(None)), None);
        assert_eq!(step(Some(1), Action::Observe(Some(1))), Some(Some(1)));
        assert_eq!(step(None, Action::Observe(Some(1))), None);
    }
}
