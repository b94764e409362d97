//! `POST /api/v1/sql` `{"query": "SELECT …", "format": "json"|"ndjson"|"csv"|"arrow"}`:
//! read-only SQL over the engine (crates/skein-sql, DataFusion).
//!
//! JSON answers are `{"columns": [{"name", "type"}], "rows": [[…]],
//! "truncated": bool}`, at most `--sql-max-rows` rows. The other formats
//! stream every row, a batch at a time, and stop reading the engine when
//! the client goes away (the body — and with it the query — is dropped).
//!
//! Errors before the first row are the API's usual error JSON: a bad or
//! refused query is 400 with DataFusion's message (`bad_request`), a query
//! past `--sql-memory` 400 `too_large`, one past `--sql-timeout` 400
//! `timeout`. Once rows have been sent the status is set: NDJSON ends with
//! an `{"error": …}` line, CSV and Arrow bodies are cut off (an incomplete
//! chunked body, which clients report as an error).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use datafusion_stream::{Next, next_before};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use skein_sql::datafusion::arrow::array::RecordBatch;
use skein_sql::datafusion::physical_plan::SendableRecordBatchStream;
use skein_sql::output::{Encoder, Format, JsonAnswer};
use skein_sql::{Answer, Sql, SqlError};

use super::ApiError;
use super::params::Params;
use crate::app::App;
use crate::tenancy::Tenant;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlRequest {
    query: String,
    #[serde(default)]
    format: Option<String>,
}

fn api_error(e: SqlError) -> ApiError {
    let (status, code) = match &e {
        SqlError::Invalid(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        SqlError::TooLarge { .. } => (StatusCode::BAD_REQUEST, "too_large"),
        SqlError::Timeout(_) => (StatusCode::BAD_REQUEST, "timeout"),
        SqlError::Engine(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    ApiError {
        status,
        code,
        message: e.to_string(),
    }
}

pub async fn post(
    State(app): State<Arc<App>>,
    tenant: Tenant,
    Query(q): super::handlers::Q,
    body: Bytes,
) -> Result<Response, ApiError> {
    Params::new(q).finish()?;
    let body: SqlRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(&format!(
            "body must be {{\"query\": \"SELECT …\", \"format\": \"json\"}}: {e}"
        ))
    })?;
    let format: Format = body
        .format
        .as_deref()
        .unwrap_or("json")
        .parse()
        .map_err(|e: String| ApiError::bad_param("format", &e))?;
    let sql = super::space(&app, &tenant)
        .await?
        .sql(&app.config.sql)
        .map_err(api_error)?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + sql.options().timeout;
    let answer = sql.run(&body.query).await.map_err(api_error)?;
    let out = match format {
        Format::Json => json_answer(&sql, answer, deadline).await,
        _ => streamed(sql.clone(), answer, format, deadline).await,
    };
    app.metrics.observe_query("sql", started.elapsed().as_secs_f64());
    out
}

async fn json_answer(sql: &Sql, answer: Answer, deadline: tokio::time::Instant) -> Result<Response, ApiError> {
    let cap = sql.options().max_json_rows;
    let mut out = JsonAnswer::new(&answer.schema);
    let mut stream = answer.stream;
    loop {
        match next_before(&mut stream, deadline).await {
            Next::Batch(b) => {
                if !out.add(&b, cap).map_err(|e| api_error(sql.error(e)))? {
                    break;
                }
            }
            Next::End => break,
            Next::Failed(e) => return Err(api_error(sql.error(e))),
            Next::TimedOut => return Err(api_error(SqlError::Timeout(sql.options().timeout))),
        }
    }
    // Dropping the stream stops the scans feeding it.
    drop(stream);
    let bytes = serde_json::to_vec(&out.to_json()).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// Where a streamed answer is.
struct Streaming {
    sql: Arc<Sql>,
    stream: SendableRecordBatchStream,
    encoder: Encoder,
    format: Format,
    deadline: tokio::time::Instant,
    /// A batch read before the response started.
    first: Option<RecordBatch>,
    /// The stream has ended already.
    ended: bool,
    done: bool,
}

async fn streamed(
    sql: Arc<Sql>,
    answer: Answer,
    format: Format,
    deadline: tokio::time::Instant,
) -> Result<Response, ApiError> {
    let mut stream = answer.stream;
    // The first batch is awaited before the status is sent, so that most
    // failures (sorts and aggregations fail before their first row) are an
    // error status rather than a cut body.
    let first = match next_before(&mut stream, deadline).await {
        Next::Batch(b) => Some(b),
        Next::End => None,
        Next::Failed(e) => return Err(api_error(sql.error(e))),
        Next::TimedOut => return Err(api_error(SqlError::Timeout(sql.options().timeout))),
    };
    let mut encoder = Encoder::new(format, answer.schema.clone()).map_err(|e| api_error(sql.error(e)))?;
    let header_bytes = encoder.header().map_err(|e| api_error(sql.error(e)))?;
    let st = Streaming {
        sql,
        stream,
        encoder,
        format,
        deadline,
        ended: first.is_none(),
        first,
        done: false,
    };
    let body = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(header_bytes)) }).chain(
        futures::stream::unfold(st, |mut st| async move {
            if st.done {
                return None;
            }
            let next = match st.first.take() {
                Some(b) => Next::Batch(b),
                None if st.ended => Next::End,
                None => next_before(&mut st.stream, st.deadline).await,
            };
            let chunk = match next {
                Next::Batch(b) => match st.encoder.batch(&b) {
                    Ok(bytes) => Ok(bytes),
                    Err(e) => Err(st.sql.error(e)),
                },
                Next::End => {
                    st.done = true;
                    match st.encoder.finish() {
                        Ok(bytes) => Ok(bytes),
                        Err(e) => Err(st.sql.error(e)),
                    }
                }
                Next::Failed(e) => Err(st.sql.error(e)),
                Next::TimedOut => Err(SqlError::Timeout(st.sql.options().timeout)),
            };
            match chunk {
                Ok(bytes) => Some((Ok(Bytes::from(bytes)), st)),
                Err(e) => {
                    st.done = true;
                    let e = api_error(e);
                    if st.format == Format::Ndjson {
                        let line = json!({"error": {"code": e.code, "message": e.message}});
                        Some((Ok(Bytes::from(format!("{line}\n"))), st))
                    } else {
                        Some((Err(std::io::Error::other(e.message)), st))
                    }
                }
            }
        }),
    );
    Ok(([(header::CONTENT_TYPE, format.content_type())], Body::from_stream(body)).into_response())
}

mod datafusion_stream {
    use futures::StreamExt;
    use skein_sql::datafusion::arrow::array::RecordBatch;
    use skein_sql::datafusion::error::DataFusionError;
    use skein_sql::datafusion::physical_plan::SendableRecordBatchStream;

    pub enum Next {
        Batch(RecordBatch),
        End,
        Failed(DataFusionError),
        TimedOut,
    }

    /// The stream's next batch, unless `deadline` passes first.
    pub async fn next_before(s: &mut SendableRecordBatchStream, deadline: tokio::time::Instant) -> Next {
        match tokio::time::timeout_at(deadline, s.next()).await {
            Err(_) => Next::TimedOut,
            Ok(None) => Next::End,
            Ok(Some(Err(e))) => Next::Failed(e),
            Ok(Some(Ok(b))) => Next::Batch(b),
        }
    }
}
