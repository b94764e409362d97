//! `skein sql "SELECT …"`: a read-only SQL query (`POST /api/v1/sql`), as
//! a table on a terminal, else the API's JSON answer
//! (`{"columns", "rows", "truncated"}`).

use std::io::Read;

use clap::Args;
use serde_json::{Map, Value, json};

use super::Ctx;
use super::client::{CliError, CliResult, Exit};
use super::output::{table, write_stdout};

#[derive(Args, Debug)]
pub struct SqlArgs {
    /// The query: one SELECT (or WITH, EXPLAIN, SHOW) over the tables
    /// spans, logs and metric_points (docs/sql.md); `-` reads it from stdin.
    pub query: String,
}

pub fn sql(ctx: &Ctx, a: &SqlArgs) -> CliResult<Exit> {
    let query = if a.query == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| CliError::usage(format!("reading the query from stdin: {e}")))?;
        s
    } else {
        a.query.clone()
    };
    let v = ctx
        .client(false)?
        .post_json(&["api", "v1", "sql"], &[], &json!({"query": query, "format": "json"}))?;
    if !ctx.out.table() {
        ctx.out.json(&v)?;
        return Ok(Exit::Ok);
    }
    write_stdout(table_text(&v).trim_end())?;
    if v["truncated"].as_bool() == Some(true) {
        eprintln!(
            "(only the first {} rows: the answer was cut at the server's --sql-max-rows; add a LIMIT or aggregate)",
            v["rows"].as_array().map_or(0, Vec::len)
        );
    }
    Ok(Exit::Ok)
}

/// The answer as aligned columns headed by the column names.
fn table_text(v: &Value) -> String {
    let names: Vec<String> = v["columns"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| c["name"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default();
    // Cells are looked up by position (names may repeat or hold dots).
    let columns: Vec<(String, String)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("c{i}"), n.clone()))
        .collect();
    let rows: Vec<Value> = v["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let mut o = Map::new();
                    for (i, cell) in r.as_array().into_iter().flatten().enumerate() {
                        o.insert(format!("c{i}"), cell.clone());
                    }
                    Value::Object(o)
                })
                .collect()
        })
        .unwrap_or_default();
    table(&rows, &columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_head_columns_by_name_and_align_numbers() {
        let v = json!({
            "columns": [{"name": "service_name", "type": "VARCHAR"}, {"name": "count(*)", "type": "BIGINT"}],
            "rows": [["api", 12], ["db", 3]],
            "truncated": false
        });
        assert_eq!(
            table_text(&v),
            "service_name  count(*)\napi                 12\ndb                   3\n"
        );
    }
}
