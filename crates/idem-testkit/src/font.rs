//! The font for plot text, loaded at run time.
//!
//! plotters' `ab_glyph` backend renders text from a font registered in memory instead of asking
//! the system (fontconfig/freetype), which keeps the build free of C libraries. The font is read
//! once per process from an environment variable (`$IDEM_JEPSEN_FONT` here, `$IDEM_BENCH_FONT`
//! in idem-bench, which shares this module) or Debian's `fonts-dejavu-core` location. Without a
//! font the plots are still drawn, just without any text.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

/// Environment variable naming a TrueType font file to use instead of the default (in the
/// jepsen harness).
pub const FONT_ENV: &str = "IDEM_JEPSEN_FONT";

/// The family name under which the font is registered.
pub const FAMILY: &str = "sans-serif";

/// Where the font is looked for, in order (after the environment variable).
const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

static LOADED: OnceLock<bool> = OnceLock::new();

/// True when a font is registered and plots can carry text (loads it on first call, from
/// `$IDEM_JEPSEN_FONT` or the default locations).
pub fn text_available() -> bool {
    text_available_from(FONT_ENV)
}

/// As [`text_available`], with the font file named by `env_var` instead. The first call in
/// the process decides: the font is registered once.
pub fn text_available_from(env_var: &str) -> bool {
    *LOADED.get_or_init(|| load(env_var))
}

fn load(env_var: &str) -> bool {
    let from_env = std::env::var(env_var).ok();
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
