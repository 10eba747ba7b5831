//! One decode step per RPC: a wire request becomes a validated input, or the call fails with an
//! `INVALID_*` reason and nothing happens.
//!
//! A handler then reads top to bottom: decode (here) → policy → replay or propose → encode
//! ([`super::encode`]). Every field check of a request is in the decoder of that request, so
//! what an RPC accepts can be read in one place.

pub mod claim;
pub mod fields;
pub mod lookup;
pub mod owner;

pub use claim::ClaimInput;
pub use fields::BodyLimits;
pub use lookup::Lookup;
