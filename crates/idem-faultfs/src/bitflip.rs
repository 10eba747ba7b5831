//! Flipping bits in a file: the silent corruption a later nemesis injects into a stopped
//! node's WAL, SST, Raft log or snapshot files (after Jepsen's `bitflip-wal/snap`).
//!
//! Seeded, so a failing run reproduces: the same file length, count and seed flip the same
//! bits. The flips are returned (and printed by the binary) so a test can name the damage
//! it expects a node to detect.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::FaultfsError;

/// One flipped bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Flip {
    /// Byte offset in the file.
    pub offset: u64,
    /// Bit within the byte (0 is the least significant).
    pub bit: u8,
}

/// Flips `count` distinct random bits of the file at `path` (chosen from `seed`), writes the
/// file back in place and fsyncs it. Returns the flips in offset order.
pub fn bitflip(path: &Path, count: usize, seed: u64) -> Result<Vec<Flip>, FaultfsError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(FaultfsError::io("open", path))?;
    let len = file
        .metadata()
        .map_err(FaultfsError::io("stat", path))?
        .len();
    let bits = len.saturating_mul(8);
    if (count as u64) > bits {
        return Err(FaultfsError::Io {
            what: "flip bits in",
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{count} bits asked, the file has {bits}"),
            ),
        });
    }
    let mut rng = SplitMix64(seed);
    let mut chosen = BTreeSet::new();
    while chosen.len() < count {
        let bit = rng.next() % bits;
        chosen.insert(Flip {
            offset: bit / 8,
            bit: (bit % 8) as u8,
        });
    }
    for flip in &chosen {
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, flip.offset)
            .map_err(FaultfsError::io("read", path))?;
        byte[0] ^= 1 << flip.bit;
        file.write_all_at(&byte, flip.offset)
            .map_err(FaultfsError::io("write", path))?;
    }
    file.sync_all().map_err(FaultfsError::io("fsync", path))?;
    Ok(chosen.into_iter().collect())
}

/// SplitMix64: a tiny, well-mixed seeded generator (no dependency for one loop).
struct SplitMix64(u64);

impl SplitMix64 {
    /// The next value.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_exactly_the_reported_bits_and_reproduces_from_the_seed() {
        let dir = tempfile::TempDir::new().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let original: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&a, &original).unwrap();
        std::fs::write(&b, &original).unwrap();
        let flips = bitflip(&a, 5, 42).unwrap();
        assert_eq!(flips.len(), 5);
        assert_eq!(bitflip(&b, 5, 42).unwrap(), flips, "same seed, same flips");
        let damaged = std::fs::read(&a).unwrap();
        let mut expected = original.clone();
        for flip in &flips {
            expected[flip.offset as usize] ^= 1 << flip.bit;
        }
        assert_eq!(damaged, expected);
        let differing = original
            .iter()
            .zip(&damaged)
            .map(|(x, y)| (x ^ y).count_ones())
            .sum::<u32>();
        assert_eq!(differing, 5);
        assert_ne!(bitflip(&b, 5, 43).unwrap(), flips, "another seed");
    }

    #[test]
    fn more_bits_than_the_file_has_is_an_error() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("tiny");
        std::fs::write(&path, b"x").unwrap();
        assert!(bitflip(&path, 9, 1).is_err());
        assert_eq!(bitflip(&path, 8, 1).unwrap().len(), 8);
        assert_eq!(std::fs::read(&path).unwrap(), [!b'x']);
    }
}
