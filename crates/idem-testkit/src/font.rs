//! The font for plot text, loaded at run time.
//!
//! plotters' `ab_glyph` backend renders text from a font registered in memory instead of asking
//! the system (fontconfig/freetype), which keeps the build free of C libraries. The font is read
//! once per process from a file named by an environment variable (each tool has its own:
//! `$IDEM_JEPSEN_FONT`, `$IDEM_BENCH_FONT`) or from Debian's `fonts-dejavu-core` location.
//! Without a font the plots are still drawn, just without any text.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

/// The family name under which the font is registered.
pub const FAMILY: &str = "sans-serif";

/// Where the font is looked for, in order (after the environment variable).
const CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

static LOADED: OnceLock<bool> = OnceLock::new();

/// True when a font is registered and plots can carry text. Loads it on the first call in
/// the process, from the file named by `$env_var` or the default locations; that first call
/// decides, as the font is registered once.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_variable_the_default_locations_decide() {
        let installed = CANDIDATES
            .iter()
            .any(|path| std::path::Path::new(path).is_file());
        // No test sets this variable: only the default locations can provide the font.
        assert_eq!(text_available_from("IDEM_TESTKIT_UNSET_FONT"), installed);
        // Registered once: a later call with another variable gets the same answer.
        assert_eq!(text_available_from("IDEM_TESTKIT_OTHER_FONT"), installed);
    }
}
