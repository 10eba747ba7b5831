//! System commands (`ip`, `iptables`, `tc`) as values.
//!
//! Every change the harness makes to the machine is a [`Cmd`]: built by pure functions (so
//! unit tests can compare the exact argv without root), printed in logs in a form that can be
//! pasted into a shell, and run with its stderr kept for the error message.

use std::fmt;
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};

/// One command line: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// Program first, then its arguments.
    pub argv: Vec<String>,
}

impl Cmd {
    /// A command from its words.
    pub fn new<I, S>(words: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd {
            argv: words.into_iter().map(Into::into).collect(),
        }
    }

    /// The same command run inside network namespace `ns` (`ip netns exec ns ...`).
    pub fn in_netns(ns: &str, inner: Cmd) -> Cmd {
        let mut argv = vec!["ip".into(), "netns".into(), "exec".into(), ns.into()];
        argv.extend(inner.argv);
        Cmd { argv }
    }

    /// Runs the command; its stdout on success, an error carrying stderr otherwise.
    pub fn run(&self) -> anyhow::Result<String> {
        let (program, args) = self.argv.split_first().context("empty command")?;
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run `{self}`"))?;
        if !out.status.success() {
            bail!(
                "`{self}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs the command, ignoring failure (cleanup paths); true when it succeeded.
    pub fn run_quietly(&self) -> bool {
        self.run().is_ok()
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self
            .argv
            .iter()
            .map(|w| {
                if !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_./:=+,@%".contains(&b))
                {
                    w.clone()
                } else {
                    format!("'{}'", w.replace('\'', r"'\''"))
                }
            })
            .collect();
        f.write_str(&quoted.join(" "))
    }
}

/// Runs commands in order, stopping at the first failure.
pub fn run_all(cmds: &[Cmd]) -> anyhow::Result<()> {
    for cmd in cmds {
        cmd.run()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_a_shell_line() {
        let c = Cmd::in_netns("ns1", Cmd::new(["echo", "a b", "it's"]));
        assert_eq!(c.to_string(), r"ip netns exec ns1 echo 'a b' 'it'\''s'");
    }

    #[test]
    fn runs_and_reports_failures() {
        assert_eq!(Cmd::new(["echo", "hi"]).run().unwrap(), "hi\n");
        let e = Cmd::new(["sh", "-c", "echo oops >&2; exit 3"])
            .run()
            .unwrap_err();
        assert!(e.to_string().contains("oops"), "{e}");
        assert!(!Cmd::new(["false"]).run_quietly());
    }
}
