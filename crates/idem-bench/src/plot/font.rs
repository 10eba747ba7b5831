//! The font for plot text, loaded at run time (the jepsen harness's approach).
//!
//! plotters' `ab_glyph` backend renders text from a font registered in memory instead of
//! asking the system (fontconfig/freetype), which keeps the build free of C libraries. The
//! font is read once per process from `$IDEM_BENCH_FONT` or Debian's `fonts-dejavu-core`
//! location (installed by `scripts/bootstrap.sh`). Without a font the plots are drawn
//! without text rather than not at all.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

/// Environment variable naming a TrueType font file to use instead of the default.
pub const FONT_ENV: &str = "IDEM_BENCH_FONT";

/// The family name under which the font is registered.
pub const FAMILY: &str = "sans-serif";

const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

static LOADED: OnceLock<bool> = OnceLock::new();

/// True when a font is registered and plots can carry text (loads it on first call).
pub fn text_available() -> bool {
    *LOADED.get_or_init(load)
}

fn load() -> bool {
    let from_env = std::env::var(FONT_ENV).ok();
    let paths = from_env
        .iter()
        .map(String::as_str)
        .chain(CANDIDATES.iter().copied());
    for path in paths {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        // plotters keeps `&'static` font data; the font is loaded once per process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
            return true;
        }
    }
    false
}
