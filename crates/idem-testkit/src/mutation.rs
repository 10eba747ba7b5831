//! Structured mutations of encoded bytes, for the decoder property tests.
//!
//! Every decoder reachable from the network or the disk (the Raft payload codec, record and
//! log-entry codecs, snapshot and backup files, protobuf requests) is fuzzed the same way:
//! start from a real encoding, apply a few edits (bits flipped, a slice deleted, repeated or
//! inserted, a length prefix made huge, the input cut short), and check the decoder answers
//! an error instead of panicking or allocating what a length prefix merely claims. The edits
//! are defined once here so that each crate's tests mean the same thing by "a mutation".

use proptest::prelude::*;
use proptest::strategy::Union;

/// How a format writes its length prefixes, for [`Mutation::HugeLength`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthPrefix {
    /// bincode 1: eight bytes, little-endian.
    U64Le,
    /// idem's snapshot and backup frames: four bytes, big-endian.
    U32Be,
}

impl LengthPrefix {
    /// The prefix `MAX >> shift` in this encoding.
    fn huge(self, shift: u32) -> Vec<u8> {
        match self {
            LengthPrefix::U64Le => (u64::MAX >> shift).to_le_bytes().to_vec(),
            LengthPrefix::U32Be => (u32::MAX >> shift).to_be_bytes().to_vec(),
        }
    }

    /// The shifts worth drawing: from the largest value down to about a megabyte.
    fn shifts(self) -> std::ops::Range<u32> {
        match self {
            LengthPrefix::U64Le => 0..40,
            LengthPrefix::U32Be => 0..32,
        }
    }
}

/// What mutations to draw for one format.
#[derive(Clone, Copy, Debug)]
pub struct MutationSpace {
    /// Longest slice deleted or repeated.
    pub max_span: usize,
    /// Longest run of bytes inserted.
    pub max_insert: usize,
    /// The format's length prefix, when huge lengths are worth trying.
    pub length_prefix: Option<LengthPrefix>,
}

impl MutationSpace {
    /// One mutation drawn from this space.
    pub fn mutation(self) -> BoxedStrategy<Mutation> {
        let mut edits = vec![
            (any::<usize>(), 1..=255u8)
                .prop_map(|(at, bits)| Mutation::Flip(at, bits))
                .boxed(),
            (any::<usize>(), 0..self.max_span)
                .prop_map(|(at, len)| Mutation::Delete(at, len))
                .boxed(),
            (any::<usize>(), 0..self.max_span)
                .prop_map(|(at, len)| Mutation::Repeat(at, len))
                .boxed(),
            (
                any::<usize>(),
                prop::collection::vec(any::<u8>(), 0..self.max_insert),
            )
                .prop_map(|(at, bytes)| Mutation::Insert(at, bytes))
                .boxed(),
            any::<usize>().prop_map(Mutation::Truncate).boxed(),
        ];
        if let Some(prefix) = self.length_prefix {
            edits.push(
                (any::<usize>(), prefix.shifts())
                    .prop_map(move |(at, shift)| Mutation::HugeLength(at, shift, prefix))
                    .boxed(),
            );
        }
        Union::new(edits).boxed()
    }

    /// A sequence of mutations drawn from this space, as many as `count` allows.
    pub fn mutations(self, count: std::ops::Range<usize>) -> BoxedStrategy<Vec<Mutation>> {
        prop::collection::vec(self.mutation(), count).boxed()
    }
}

/// One edit of an encoding, at positions taken modulo its length.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// The byte at a position XORed with a non-zero mask.
    Flip(usize, u8),
    /// A slice of up to this many bytes removed.
    Delete(usize, usize),
    /// A slice of up to this many bytes repeated right after itself.
    Repeat(usize, usize),
    /// These bytes inserted.
    Insert(usize, Vec<u8>),
    /// A length prefix of `MAX >> shift` written over the bytes at a position.
    HugeLength(usize, u32, LengthPrefix),
    /// The input cut at a position.
    Truncate(usize),
}

impl Mutation {
    /// Applies this edit to `bytes`.
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        let at = |i: usize, len: usize| i % (len + 1);
        match self {
            Mutation::Flip(i, bits) => {
                if !bytes.is_empty() {
                    let i = i % bytes.len();
                    bytes[i] ^= bits;
                }
            }
            Mutation::Delete(i, len) => {
                let start = at(*i, bytes.len());
                let end = (start + len).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Repeat(i, len) => {
                let start = at(*i, bytes.len());
                let end = (start + len).min(bytes.len());
                let copy = bytes[start..end].to_vec();
                bytes.splice(end..end, copy);
            }
            Mutation::Insert(i, inserted) => {
                let start = at(*i, bytes.len());
                bytes.splice(start..start, inserted.iter().copied());
            }
            Mutation::HugeLength(i, shift, prefix) => {
                let huge = prefix.huge(*shift);
                let start = at(*i, bytes.len());
                let end = (start + huge.len()).min(bytes.len());
                bytes.splice(start..end, huge);
            }
            Mutation::Truncate(i) => {
                let len = at(*i, bytes.len());
                bytes.truncate(len);
            }
        }
    }
}

/// `original` with every one of `mutations` applied, in order.
pub fn mutated(original: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for mutation in mutations {
        mutation.apply(&mut bytes);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_edit_does_what_it_says() {
        let bytes = [1u8, 2, 3, 4, 5];
        let one = |m: Mutation| mutated(&bytes, &[m]);
        assert_eq!(one(Mutation::Flip(6, 0xff)), [1, 0xfd, 3, 4, 5]);
        assert_eq!(one(Mutation::Delete(1, 2)), [1, 4, 5]);
        assert_eq!(one(Mutation::Repeat(3, 9)), [1, 2, 3, 4, 5, 4, 5]);
        assert_eq!(one(Mutation::Insert(5, vec![9])), [1, 2, 3, 4, 5, 9]);
        assert_eq!(one(Mutation::Truncate(2)), [1, 2]);
        assert_eq!(
            one(Mutation::HugeLength(1, 0, LengthPrefix::U32Be)),
            [1, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            one(Mutation::HugeLength(0, 8, LengthPrefix::U64Le)),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00]
        );
        assert_eq!(mutated(&[], &[Mutation::Flip(3, 1)]), [] as [u8; 0]);
    }
}
