//! Reading the configuration file: TOML syntax errors with their line and column, and every
//! unknown key of every section, reported together.

use std::path::Path;

use super::limits::unknown_limit_keys;
use super::sources::unknown_keys;
use super::ConfigError;

pub(super) fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
    let one = |why: String| ConfigError::Invalid(vec![why]);
    let text = std::fs::read_to_string(path)
        .map_err(|e| one(format!("config file {}: {e}", path.display())))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let position = e
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{column}")
            })
            .unwrap_or_default();
        one(format!(
            "config file {}{position}: {}",
            path.display(),
            e.message().trim().replace('\n', " ")
        ))
    })?;
    let mut problems = unknown_keys(&table, path);
    problems.extend(unknown_limit_keys(&table, path));
    if problems.is_empty() {
        Ok(table)
    } else {
        problems.sort();
        Err(ConfigError::Invalid(problems))
    }
}
