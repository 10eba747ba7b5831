//! idem-testkit: what idem's test and measurement tools share, and nothing else.
//!
//! The jepsen harness and idem-bench both need a seeded generator whose sequences stay the
//! same across releases (a run is reproduced from its printed seed) and plots with text. Both
//! live here rather than in one of the tools, so that idem-bench does not pull in the whole
//! fault-injection harness for them:
//!
//! - [`Rng`] ([`rng`]): SplitMix64, seeded, with independent streams per worker;
//! - [`font`]: the plot font, registered once with plotters from a file named by an
//!   environment variable or Debian's DejaVu Sans;
//! - [`mutation`]: the structured edits of encoded bytes every decoder's property tests
//!   draw from (in the crates' dev-dependencies only).
//!
//! Kept dependency-light on purpose: plotters (for the font registration), proptest (for
//! the mutations) and std only.

pub mod font;
pub mod mutation;
pub mod rng;

pub use rng::Rng;
