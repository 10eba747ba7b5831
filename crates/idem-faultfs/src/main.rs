//! `idem-faultfs`: mount the fault-injecting filesystem, send it commands, flip bits.
//!
//! ```text
//! idem-faultfs mount <BACKING> <MOUNTPOINT>      serve until unmounted (fusermount3 -u)
//! idem-faultfs ctl <MOUNTPOINT> clear-cache      or checkpoint, fail-fsync on|off,
//!                                                fail-write enospc|eio|off; prints the report
//! idem-faultfs ctl <MOUNTPOINT>                  prints the report
//! idem-faultfs bitflip <FILE> --count 3 --seed 7 prints each flipped offset and bit
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use idem_faultfs::{FaultfsError, Options};

/// Command line.
#[derive(Parser)]
#[command(
    name = "idem-faultfs",
    about = "A FUSE filesystem that loses unsynced writes on command"
)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    action: Action,
}

/// The subcommands.
#[derive(Subcommand)]
enum Action {
    /// Mount BACKING on MOUNTPOINT and serve it in the foreground.
    Mount {
        /// The directory that holds the durable data.
        backing: PathBuf,
        /// Where to mount.
        mountpoint: PathBuf,
        /// Also fdatasync backing files on fsync (survives a real host crash too).
        #[arg(long)]
        sync_backing: bool,
        /// FUSE request threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Strict POSIX namespace durability: creates, renames and removals are undone by a
        /// power loss unless their directory was fsynced after them.
        #[arg(long)]
        lose_unsynced_names: bool,
    },
    /// Send a command to a mounted faultfs and print its report.
    Ctl {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// clear-cache, checkpoint, fail-fsync on|off, fail-write enospc|eio|off; none:
        /// only print the report.
        command: Vec<String>,
    },
    /// Flip random bits of a file in place (seeded) and print them.
    Bitflip {
        /// The file to damage.
        file: PathBuf,
        /// How many distinct bits.
        #[arg(long, default_value_t = 1)]
        count: usize,
        /// The random seed (the same seed flips the same bits of a file of the same size).
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse().action) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("idem-faultfs: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one subcommand.
fn run(action: Action) -> Result<(), FaultfsError> {
    match action {
        Action::Mount {
            backing,
            mountpoint,
            sync_backing,
            threads,
            lose_unsynced_names,
        } => {
            let options = Options {
                sync_backing,
                threads,
                lose_unsynced_names,
            };
            tracing::info!(backing = %backing.display(), mountpoint = %mountpoint.display(), "serving");
            idem_faultfs::serve(&backing, &mountpoint, &options)
        }
        Action::Ctl {
            mountpoint,
            command,
        } => {
            let report = if command.is_empty() {
                idem_faultfs::report(&mountpoint)?
            } else {
                idem_faultfs::control(&mountpoint, &command.join(" "))?
            };
            print!("{report}");
            Ok(())
        }
        Action::Bitflip { file, count, seed } => {
            for flip in idem_faultfs::bitflip(&file, count, seed)? {
                println!("{} offset {} bit {}", file.display(), flip.offset, flip.bit);
            }
            Ok(())
        }
    }
}
