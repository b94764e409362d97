//! LLM and agent telemetry, aggregated: usage and cost by a dimension, tool
//! calls by tool, and sessions (conversations).
//!
//! Parts answer from their calls tables (the GenAI and session rows of the
//! part's typed columns `llm_*`, `session_id`, …, written from each span's
//! [`LlmCall`]; see `part::calls`), never from attribute JSON; the hot
//! tier derives the same view from its spans; a part written before those
//! columns existed is decoded instead. Costs are computed at query time from
//! tokens and the price table, so a corrected price applies to old data
//! too; a cost the client reported wins.
//!
//! A session is the set of traces in which some span carries the session
//! id; its calls, tokens and cost are those of every GenAI span in those
//! traces (OTel GenAI instrumentations put `gen_ai.conversation.id` on the
//! agent span only, not on each model call below it).

mod batch;
mod calls;
mod names;
mod row;
mod sessions;
mod usage;

pub use sessions::{SessionDetail, SessionPage, SessionSummary, SessionTurn, decode_cursor, session, sessions};
pub use usage::{ToolSummary, Usage, UsageFigures, UsageGroup, UsageGroupBy, tools, usage};
