//! The unique constraint: scope plus key, and its storage encoding.
//!
//! The encoding is a sequence of length-prefixed fields in the order tenant, actor,
//! environment, endpoint, key. Length prefixes make it prefix-free, and putting the actor
//! right after the tenant makes "all records of one subject" a single prefix scan (used by
//! `PurgeSubject`).

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::key::IdempotencyKey;
use crate::scope::Scope;

/// A scope and an idempotency key: the identity of a record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordKey {
    /// The scope.
    pub scope: Scope,
    /// The client's key.
    pub key: IdempotencyKey,
}

impl RecordKey {
    /// Builds a record key.
    pub fn new(scope: Scope, key: IdempotencyKey) -> Self {
        RecordKey { scope, key }
    }

    /// The storage encoding (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        encode_fields(&[
            self.scope.tenant(),
            self.scope.actor(),
            self.scope.environment(),
            self.scope.endpoint(),
            self.key.as_str(),
        ])
    }

    /// The prefix shared by every record of `tenant`.
    pub fn tenant_prefix(tenant: &str) -> Vec<u8> {
        encode_fields(&[tenant])
    }

    /// The prefix shared by every record of `(tenant, actor)`.
    pub fn subject_prefix(tenant: &str, actor: &str) -> Vec<u8> {
        encode_fields(&[tenant, actor])
    }

    /// Decodes [`RecordKey::encode`]'s output, validating every field again.
    pub fn decode(mut bytes: &[u8]) -> Result<Self, StoreError> {
        let mut fields = Vec::with_capacity(5);
        while !bytes.is_empty() {
            let (field, rest) = take_field(bytes)?;
            fields.push(field);
            bytes = rest;
        }
        let [tenant, actor, environment, endpoint, key] = <[String; 5]>::try_from(fields)
            .map_err(|_| StoreError::Corrupt("record key must have 5 fields".into()))?;
        let corrupt = |e: crate::error::ValidationError| StoreError::Corrupt(e.to_string());
        let scope = Scope::new(tenant, environment, actor, endpoint).map_err(corrupt)?;
        let key = IdempotencyKey::new(key).map_err(corrupt)?;
        Ok(RecordKey { scope, key })
    }
}

/// `fields` length-prefixed, in one allocation of the exact size: a key is encoded several
/// times per write (each read, the write set and its indexes), so a regrowing buffer showed.
fn encode_fields(fields: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|field| field.len() + 1).sum());
    for field in fields {
        push_field(&mut out, field);
    }
    out
}

fn push_field(out: &mut Vec<u8>, field: &str) {
    // Every field is validated to at most 255 bytes.
    out.push(u8::try_from(field.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(field.as_bytes());
}

fn take_field(bytes: &[u8]) -> Result<(String, &[u8]), StoreError> {
    let (&len, rest) = bytes
        .split_first()
        .ok_or_else(|| StoreError::Corrupt("empty record key field".into()))?;
    let len = usize::from(len);
    if rest.len() < len {
        return Err(StoreError::Corrupt("truncated record key".into()));
    }
    let (field, rest) = rest.split_at(len);
    let field = String::from_utf8(field.to_vec())
        .map_err(|_| StoreError::Corrupt("record key is not UTF-8".into()))?;
    Ok((field, rest))
}
