//! `skein export spans|logs [filters] > data.ndjson`: `/api/v1/export`,
//! streamed to stdout as it arrives, with a progress bar on a terminal.

use std::io::{BufRead, BufReader, IsTerminal, Write};

use clap::Subcommand;
use serde_json::Value;

use super::Ctx;
use super::client::{CliError, CliResult, Exit, NotFound, Params, api_error};
use super::filters::{LogFilters, SpanFilters};

#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// Every span matching the filters (`--limit` caps the export).
    Spans {
        #[command(flatten)]
        filters: SpanFilters,
    },
    /// Every log record matching the filters.
    Logs {
        #[command(flatten)]
        filters: LogFilters,
    },
}

/// Exit 0 when the server said the export is complete; 4 when the stream
/// was cut or ended with an error (what arrived is on stdout).
pub fn export(ctx: &Ctx, c: &ExportCommand) -> CliResult<Exit> {
    let (signal, mut p): (&str, Params) = match c {
        ExportCommand::Spans { filters } => ("spans", filters.params()),
        ExportCommand::Logs { filters } => ("logs", filters.params()),
    };
    p.push(("signal".into(), signal.into()));
    let r = ctx.client(true)?.send(&["api", "v1", "export"], &p)?;
    let status = r.status();
    if !status.is_success() {
        let body = r.bytes().unwrap_or_default();
        return Err(api_error(status, &body, NotFound::Unexpected));
    }
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {human_pos} {msg} exported ({per_sec}, {elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        b.set_message(signal);
        b
    });
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut last = String::new();
    let mut reader = BufReader::new(r);
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| CliError::new(Exit::Server, "export_cut", format!("the export stream broke: {e}")))?;
        if n == 0 {
            break;
        }
        out.write_all(line.as_bytes())
            .map_err(|e| CliError::new(Exit::Server, "stdout", format!("cannot write the export: {e}")))?;
        if let Some(b) = &bar {
            b.inc(1);
        }
        std::mem::swap(&mut last, &mut line);
    }
    out.flush()
        .map_err(|e| CliError::new(Exit::Server, "stdout", format!("cannot write the export: {e}")))?;
    let tail: Value = serde_json::from_str(&last).unwrap_or(Value::Null);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if tail["export_complete"] == true {
        if std::io::stderr().is_terminal() {
            eprintln!("{} {signal} exported", tail["count"]);
        }
        return Ok(Exit::Ok);
    }
    let why = tail["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| "the stream ended without its export_complete line".into());
    Err(CliError::new(
        Exit::Server,
        "export_cut",
        format!("export incomplete: {why}"),
    ))
}
