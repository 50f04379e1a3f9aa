//! `bench-report`: the reporting half of the benchmark suite.
//!
//! - `bench-report parse wrk|h2load|stime FILE` prints one load tool's output as one JSON object.
//! - `bench-report summarize DIR [--out DIR] [--command "..."]` reads a suite run's scenario files
//!   and writes summary.json, summary.md and the SVG plots.
//!
//! Exit status: 0 on success (missing scenarios are notes in the report, not failures), 1 when
//! the input cannot be read or parsed or an output cannot be written, 2 on bad usage.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use loadtests::suite;

#[derive(Parser)]
#[command(name = "bench-report", about = "Parse load-tool output and summarise a benchmark suite run")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print one load tool's captured output (stdout and stderr) as one JSON object.
    Parse {
        tool: Tool,
        /// The captured output; `-` reads standard input.
        file: PathBuf,
    },
    /// Write summary.json, summary.md and the plots for a suite run's directory.
    Summarize {
        /// The directory with h1-small.json, h1-16k.json, h1-large.json, https.json, h1-vhosts.json, latency.json, tls-h2.json,
        /// openloop.json, overload.json (any may be missing).
        dir: PathBuf,
        /// Where to write; created if needed. Default: DIR.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The command line that produced the run, shown in the report header.
        #[arg(long)]
        command: Option<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Tool {
    Wrk,
    H2load,
    Stime,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench-report: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Parse { tool, file } => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).map_err(|e| format!("cannot read standard input: {e}"))?
            } else {
                std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?
            };
            let json = match tool {
                Tool::Wrk => suite::parse_wrk(&text).map(|r| serde_json::to_string(&r)),
                Tool::H2load => suite::parse_h2load(&text).map(|r| serde_json::to_string(&r)),
                Tool::Stime => suite::parse_stime(&text).map(|r| serde_json::to_string(&r)),
            };
            let json =
                json.map_err(|e| format!("{}: {e}", file.display()))?.map_err(|e| format!("cannot encode: {e}"))?;
            println!("{json}");
            Ok(())
        }
        Command::Summarize { dir, out, command } => {
            if !dir.is_dir() {
                return Err(format!("{} is not a directory", dir.display()));
            }
            let out = out.unwrap_or_else(|| dir.clone());
            let written = suite::summarize_dir(&dir, &out, command.as_deref())?;
            for file in written.files {
                println!("{}", file.display());
            }
            Ok(())
        }
    }
}
