//! `skein`: the Skein server (`skein serve`) and its command-line client.

mod cli;
mod serve;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Skein: a telemetry datastore for software written with and by AI agents.
///
/// `skein serve` runs the server; every other command asks it (see
/// docs/cli.md). Client output is the API's JSON when stdout is not a
/// terminal, a table when it is. Exit codes: 0 ok, 1 no results, 2 usage
/// error, 3 server unreachable, 4 server error.
#[derive(Parser)]
#[command(name = "skein", version, about, long_about)]
struct Cli {
    #[command(flatten)]
    global: cli::GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: OTLP ingest (gRPC :4317, HTTP :4318) and the API (:7700).
    Serve(Box<serve::ServeArgs>),
    #[command(flatten)]
    Client(cli::Command),
}

fn main() -> ExitCode {
    skein_engine::allocator::tune_mimalloc();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    match cli.command {
        Command::Serve(args) => serve::main(*args),
        Command::Client(cmd) => cli::run(cmd, cli.global).into(),
    }
}

/// `--help` and `--version` print and exit 0; a bad command line exits 2,
/// its message as JSON on stderr when stderr is not a terminal.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if std::io::stderr().is_terminal() {
        let _ = e.print();
    } else {
        eprintln!(
            "{}",
            json!({"error": {"code": "usage", "message": usage_message(&e.render().to_string())}})
        );
    }
    ExitCode::from(cli::client::Exit::Usage as u8)
}

/// Clap's message in one line for JSON: the problem, then the usage line
/// (without the tips and the "try --help" trailer).
fn usage_message(rendered: &str) -> String {
    let text = rendered.trim();
    let text = text.strip_prefix("error: ").unwrap_or(text);
    let problem = text.split("\n\n").next().unwrap_or(text).trim().replace('\n', " ");
    match text.lines().find_map(|l| l.strip_prefix("Usage: ")) {
        Some(usage) => format!("{problem} (usage: {})", usage.trim()),
        None => problem,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn usage_errors_are_one_line() {
        let rendered = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: skein services [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            super::usage_message(rendered),
            "unexpected argument '--bogus' found (usage: skein services [OPTIONS])"
        );
        assert_eq!(
            super::usage_message("error: bad\n\nFor more information, try '--help'."),
            "bad"
        );
    }
}
