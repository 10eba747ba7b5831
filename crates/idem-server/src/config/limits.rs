//! `[limits]`: rates, quotas, concurrency, HTTP/2 and snapshot bounds, the disk reserve
//! (docs/limits.md).
//!
//! Scalars come from `IDEM_LIMITS_*` environment variables or the file (no flags: they are
//! tuned per deployment, not per run); the per-tenant overrides
//! (`[limits.tenants.<tenant>]`) are tables and only exist in the file.

use std::path::Path;
use std::time::Duration;

use super::sources::{lookup, scalar_text, Sources};
use super::values::{duration_in, format_duration, ranged};
use crate::limits::{LimitsConfig, Rate, TenantOverride};

/// The scalar keys of `[limits]`.
pub(super) const LIMITS_KEYS: &[&str] = &[
    "claims_rate",
    "claims_burst",
    "mutations_rate",
    "mutations_burst",
    "replay_cost",
    "max_active_records",
    "max_in_flight",
    "max_concurrent_streams",
    "keepalive_interval",
    "keepalive_timeout",
    "max_snapshot_bytes",
    "backup_idle_timeout",
    "backup_max_duration",
    "disk_reserve",
    "tenants",
];
/// The keys of one `[limits.tenants.<tenant>]` table.
const TENANT_KEYS: &[&str] = &[
    "claims_rate",
    "claims_burst",
    "mutations_rate",
    "mutations_burst",
    "max_active_records",
];
/// Largest rate or burst, per second or in tokens.
const MAX_RATE: u64 = 100_000_000;

/// Reads one `[limits]` scalar: `IDEM_LIMITS_<KEY>`, else the file, else `default`.
fn get<T>(
    sources: &Sources<'_>,
    key: &str,
    default: T,
    parse: impl Fn(&str) -> Result<T, String>,
    p: &mut Vec<String>,
) -> T {
    let env = format!("IDEM_LIMITS_{}", key.to_ascii_uppercase());
    let dotted = format!("limits.{key}");
    let (text, origin) = if let Some(text) = (sources.env)(&env) {
        (text, format!("environment {env}"))
    } else if let Some((table, path)) = &sources.file {
        let Some(value) = lookup(table, &dotted) else {
            return default;
        };
        let Some(text) = scalar_text(value) else {
            p.push(format!(
                "{dotted} (from file {}): expected a string or a number, got a {}",
                path.display(),
                value.type_str()
            ));
            return default;
        };
        (text, format!("file {}", path.display()))
    } else {
        return default;
    };
    parse(text.trim()).unwrap_or_else(|why| {
        p.push(format!("{dotted} = {text:?} (from {origin}): {why}"));
        default
    })
}

fn rate(text: &str) -> Result<u64, String> {
    ranged(text, 0, MAX_RATE)
}

/// A fraction of a token between 0 and 1, in thousandths.
fn replay_cost(text: &str) -> Result<u64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| "expected a fraction of a claim token such as 0.1".to_owned())?;
    if !(0.0..=1.0).contains(&value) {
        return Err("must be between 0 and 1".to_owned());
    }
    Ok((value * 1000.0).round() as u64)
}

/// `[limits]` from `sources`.
pub(super) fn build_limits(sources: &Sources<'_>, p: &mut Vec<String>) -> LimitsConfig {
    let d = LimitsConfig::default();
    let keepalive = |s: &str| duration_in(s, Duration::from_secs(1), Duration::from_secs(3600));
    LimitsConfig {
        claims: Rate {
            rate: get(sources, "claims_rate", d.claims.rate, rate, p),
            burst: get(sources, "claims_burst", d.claims.burst, rate, p),
        },
        mutations: Rate {
            rate: get(sources, "mutations_rate", d.mutations.rate, rate, p),
            burst: get(sources, "mutations_burst", d.mutations.burst, rate, p),
        },
        replay_cost_milli: get(sources, "replay_cost", d.replay_cost_milli, replay_cost, p),
        max_active_records: get(
            sources,
            "max_active_records",
            d.max_active_records,
            |s| ranged(s, 0, u64::MAX),
            p,
        ),
        max_in_flight: get(
            sources,
            "max_in_flight",
            d.max_in_flight,
            |s| ranged(s, 0, 1_000_000).map(|n| n as usize),
            p,
        ),
        max_concurrent_streams: get(
            sources,
            "max_concurrent_streams",
            d.max_concurrent_streams,
            |s| ranged(s, 1, 1_000_000).map(|n| n as u32),
            p,
        ),
        keepalive_interval: get(
            sources,
            "keepalive_interval",
            d.keepalive_interval,
            keepalive,
            p,
        ),
        keepalive_timeout: get(
            sources,
            "keepalive_timeout",
            d.keepalive_timeout,
            keepalive,
            p,
        ),
        max_snapshot_bytes: get(
            sources,
            "max_snapshot_bytes",
            d.max_snapshot_bytes,
            |s| ranged(s, 1 << 20, 1 << 50),
            p,
        ),
        backup_idle_timeout: get(
            sources,
            "backup_idle_timeout",
            d.backup_idle_timeout,
            |s| duration_in(s, Duration::from_millis(100), Duration::from_secs(3600)),
            p,
        ),
        backup_max_duration: get(
            sources,
            "backup_max_duration",
            d.backup_max_duration,
            |s| duration_in(s, Duration::from_secs(1), Duration::from_secs(7 * 86_400)),
            p,
        ),
        disk_reserve: get(
            sources,
            "disk_reserve",
            d.disk_reserve,
            |s| ranged(s, 0, 1 << 50),
            p,
        ),
        tenants: tenant_overrides(sources, p),
    }
}

/// `[limits.tenants.<tenant>]` tables (file only).
fn tenant_overrides(
    sources: &Sources<'_>,
    p: &mut Vec<String>,
) -> std::collections::BTreeMap<String, TenantOverride> {
    let mut tenants = std::collections::BTreeMap::new();
    let Some((table, path)) = &sources.file else {
        return tenants;
    };
    let Some(entries) = lookup(table, "limits.tenants").and_then(toml::Value::as_table) else {
        return tenants;
    };
    for (tenant, value) in entries {
        let name = format!("limits.tenants.{tenant:?}");
        let Some(table) = value.as_table() else {
            p.push(format!(
                "{name} (in file {}): expected a table such as {{ claims_rate = 100 }}",
                path.display()
            ));
            continue;
        };
        let field = |key: &str, p: &mut Vec<String>| tenant_field(&name, table, key, path, p);
        let claims_rate = field("claims_rate", p);
        let claims_burst = field("claims_burst", p);
        let mutations_rate = field("mutations_rate", p);
        let mutations_burst = field("mutations_burst", p);
        let rate_of = |rate: Option<u64>, burst: Option<u64>, default: Rate| {
            (rate.is_some() || burst.is_some()).then(|| Rate {
                rate: rate.unwrap_or(default.rate),
                burst: burst.unwrap_or(if rate.is_some() { 0 } else { default.burst }),
            })
        };
        let d = LimitsConfig::default();
        tenants.insert(
            tenant.clone(),
            TenantOverride {
                claims: rate_of(claims_rate, claims_burst, d.claims),
                mutations: rate_of(mutations_rate, mutations_burst, d.mutations),
                max_active_records: field("max_active_records", p),
            },
        );
    }
    tenants
}

fn tenant_field(
    name: &str,
    table: &toml::Table,
    key: &str,
    path: &Path,
    p: &mut Vec<String>,
) -> Option<u64> {
    let value = table.get(key)?;
    let parsed = scalar_text(value)
        .ok_or_else(|| format!("expected a number, got a {}", value.type_str()))
        .and_then(|text| rate(text.trim()));
    parsed
        .map_err(|why| p.push(format!("{name}.{key} (in file {}): {why}", path.display())))
        .ok()
}

/// Unknown keys in `[limits]` and its tenant tables.
pub(super) fn unknown_limit_keys(table: &toml::Table, path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(limits) = table.get("limits") else {
        return problems;
    };
    let Some(limits) = limits.as_table() else {
        problems.push(format!(
            "limits (in file {}): expected a table, got a {}",
            path.display(),
            limits.type_str()
        ));
        return problems;
    };
    let mut check = |prefix: &str, table: &toml::Table, known: &[&str]| {
        for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
            problems.push(format!(
                "{prefix}{key} (in file {}): unknown key; known keys: {}",
                path.display(),
                known.join(", ")
            ));
        }
    };
    check("limits.", limits, LIMITS_KEYS);
    if let Some(tenants) = limits.get("tenants").and_then(toml::Value::as_table) {
        for (tenant, value) in tenants {
            if let Some(custom) = value.as_table() {
                check(&format!("limits.tenants.{tenant:?}."), custom, TENANT_KEYS);
            }
        }
    }
    problems
}

/// `[limits]` as TOML, for `--print-config`.
pub(super) fn limits_toml(limits: &LimitsConfig) -> toml::Value {
    let int = |n: u64| toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let mut table = toml::Table::new();
    table.insert("claims_rate".into(), int(limits.claims.rate));
    table.insert("claims_burst".into(), int(limits.claims.burst));
    table.insert("mutations_rate".into(), int(limits.mutations.rate));
    table.insert("mutations_burst".into(), int(limits.mutations.burst));
    table.insert(
        "replay_cost".into(),
        toml::Value::Float(limits.replay_cost_milli as f64 / 1000.0),
    );
    table.insert("max_active_records".into(), int(limits.max_active_records));
    table.insert("max_in_flight".into(), int(limits.max_in_flight as u64));
    table.insert(
        "max_concurrent_streams".into(),
        int(limits.max_concurrent_streams.into()),
    );
    let duration = |d: Duration| toml::Value::String(format_duration(d));
    table.insert(
        "keepalive_interval".into(),
        duration(limits.keepalive_interval),
    );
    table.insert(
        "keepalive_timeout".into(),
        duration(limits.keepalive_timeout),
    );
    table.insert("max_snapshot_bytes".into(), int(limits.max_snapshot_bytes));
    table.insert("disk_reserve".into(), int(limits.disk_reserve));
    table.insert(
        "backup_idle_timeout".into(),
        duration(limits.backup_idle_timeout),
    );
    table.insert(
        "backup_max_duration".into(),
        duration(limits.backup_max_duration),
    );
    let mut tenants = toml::Table::new();
    for (tenant, custom) in &limits.tenants {
        let mut t = toml::Table::new();
        if let Some(rate) = custom.claims {
            t.insert("claims_rate".into(), int(rate.rate));
            t.insert("claims_burst".into(), int(rate.burst));
        }
        if let Some(rate) = custom.mutations {
            t.insert("mutations_rate".into(), int(rate.rate));
            t.insert("mutations_burst".into(), int(rate.burst));
        }
        if let Some(cap) = custom.max_active_records {
            t.insert("max_active_records".into(), int(cap));
        }
        tenants.insert(tenant.clone(), toml::Value::Table(t));
    }
    table.insert("tenants".into(), toml::Value::Table(tenants));
    toml::Value::Table(table)
}
