//! The storage form of a [`StoredResult`], versioned so that old records still decode.
//!
//! Records, log entries and snapshots are bincode 1: positional, no field names, no
//! lengths for structs. A field appended to `StoredResult` would therefore shift every
//! byte after it in a record written before (serde defaults do not help a positional
//! format), so the result is written by hand, as a tuple whose fifth element is a tag byte:
//!
//! | tag | meaning | followed by |
//! |---|---|---|
//! | 0, 1 | version 0 (status, resource, fields), `purged` = tag | nothing |
//! | 2, 3 | version 1, with a verbatim body, `purged` = tag & 1 | the [`StoredBody`] |
//!
//! Version 0 is byte for byte what the derived encoding wrote (`purged` was a bool, one
//! byte 0 or 1), so every record, log entry and snapshot written before decodes unchanged,
//! and a result without a body is still written in that form. A version-1 result read by
//! a node that predates it fails loudly (a bool of 2), never silently.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::body::StoredBody;
use super::result::{StoredResult, RESULT_VERSION_BODY};

/// Elements of a version-0 result.
const FIELDS_V0: usize = 5;

impl Serialize for StoredResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tag = (u8::from(self.body.is_some()) << 1) | u8::from(self.purged);
        let mut tuple = serializer.serialize_tuple(FIELDS_V0 + usize::from(self.body.is_some()))?;
        tuple.serialize_element(&self.status_code)?;
        tuple.serialize_element(&self.resource_id)?;
        tuple.serialize_element(&self.resource_version)?;
        tuple.serialize_element(&self.fields)?;
        tuple.serialize_element(&tag)?;
        if let Some(body) = &self.body {
            tuple.serialize_element(body)?;
        }
        tuple.end()
    }
}

impl<'de> Deserialize<'de> for StoredResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_tuple(FIELDS_V0 + 1, ResultVisitor)
    }
}

struct ResultVisitor;

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = StoredResult;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a stored result")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StoredResult, A::Error> {
        let status_code: u16 = next(&mut seq, 0)?;
        let resource_id: String = next(&mut seq, 1)?;
        let resource_version: String = next(&mut seq, 2)?;
        let fields: BTreeMap<String, String> = next(&mut seq, 3)?;
        let tag: u8 = next(&mut seq, 4)?;
        let body = match u32::from(tag >> 1) {
            0 => None,
            RESULT_VERSION_BODY => Some(next::<StoredBody, A>(&mut seq, 5)?),
            version => {
                return Err(de::Error::custom(format_args!(
                    "stored result version {version} is newer than this node"
                )))
            }
        };
        Ok(StoredResult {
            status_code,
            resource_id,
            resource_version,
            fields,
            purged: tag & 1 == 1,
            body,
        })
    }
}

fn next<'de, T: Deserialize<'de>, A: SeqAccess<'de>>(
    seq: &mut A,
    index: usize,
) -> Result<T, A::Error> {
    seq.next_element()?
        .ok_or_else(|| de::Error::invalid_length(index, &"a stored result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived layout every record was written with before result version 1.
    #[derive(Serialize)]
    struct LegacyStoredResult {
        status_code: u16,
        resource_id: String,
        resource_version: String,
        fields: BTreeMap<String, String>,
        purged: bool,
    }

    fn result(purged: bool, body: Option<StoredBody>) -> StoredResult {
        StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            resource_version: "3".into(),
            fields: BTreeMap::from([("amount".into(), "100".into())]),
            purged,
            body,
        }
    }

    fn body() -> StoredBody {
        StoredBody {
            content_type: "application/json".into(),
            bytes: br#"{"id":"ch_1"}"#.to_vec(),
        }
    }

    #[test]
    fn version_0_is_the_legacy_layout_both_ways() {
        for purged in [false, true] {
            let legacy = LegacyStoredResult {
                status_code: 201,
                resource_id: "ch_1".into(),
                resource_version: "3".into(),
                fields: BTreeMap::from([("amount".into(), "100".into())]),
                purged,
            };
            let old = bincode::serialize(&legacy).unwrap();
            assert_eq!(bincode::serialize(&result(purged, None)).unwrap(), old);
            // Followed by more data, as inside a record: nothing is read past the result.
            let framed = bincode::serialize(&(Some(legacy), 7u32)).unwrap();
            let (back, next): (Option<StoredResult>, u32) = bincode::deserialize(&framed).unwrap();
            assert_eq!((back, next), (Some(result(purged, None)), 7));
        }
    }

    #[test]
    fn version_1_round_trips_in_positional_and_self_describing_formats() {
        for value in [
            result(false, Some(body())),
            result(false, Some(StoredBody::default())),
            result(true, None),
        ] {
            let bytes = bincode::serialize(&(value.clone(), 7u32)).unwrap();
            let back: (StoredResult, u32) = bincode::deserialize(&bytes).unwrap();
            assert_eq!(back, (value.clone(), 7));
            let json = serde_json::to_string(&value).unwrap();
            assert_eq!(serde_json::from_str::<StoredResult>(&json).unwrap(), value);
        }
    }

    #[test]
    fn a_newer_version_is_refused_not_misread() {
        let mut bytes = bincode::serialize(&result(false, Some(body()))).unwrap();
        let tag = bytes.len() - bincode::serialized_size(&body()).unwrap() as usize - 1;
        assert_eq!(bytes[tag], 2);
        bytes[tag] = 4;
        let err = bincode::deserialize::<StoredResult>(&bytes).unwrap_err();
        assert!(err.to_string().contains("version 2"), "{err}");
        // An old reader (a bool where the tag is) refuses version 1 loudly.
        bytes[tag] = 2;
        assert!(
            bincode::deserialize::<(u16, String, String, BTreeMap<String, String>, bool)>(&bytes)
                .is_err()
        );
    }
}
