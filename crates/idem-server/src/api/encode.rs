//! Core types to `idem.v1` messages: the answers the services send.
//!
//! The conversions are shared with the SDK ([`idem_proto::convert`]); this is the one place
//! the services take them from, beside the answers built only here.

pub use idem_proto::convert::{
    claim_kind_to_proto, duration_to_ms, error_to_proto, record_to_proto, result_to_proto,
    stage_to_proto, state_to_proto,
};

use idem_core::State;

/// The proto name of a state (`STATE_PENDING`), the key of `records_by_state`.
pub fn state_name(state: State) -> &'static str {
    state_to_proto(state).as_str_name()
}

/// The wire value of a key warning.
pub fn key_warning_to_proto(warning: crate::signals::KeyWarning) -> idem_proto::v1::KeyWarning {
    use crate::signals::KeyWarning;
    use idem_proto::v1::KeyWarning as Pb;
    match warning {
        KeyWarning::Sequential => Pb::Sequential,
        KeyWarning::Timestamp => Pb::Timestamp,
        KeyWarning::Short => Pb::Short,
        KeyWarning::LowEntropy => Pb::LowEntropy,
    }
}
