//! `skein mcp`: the MCP server over stdio, for coding agents that start
//! their tools as processes (Claude Code, Cursor, Codex). Its tools are
//! those of `/mcp` on `skein serve` (crates/skein-server/src/mcp), asking
//! the server at `--server` over HTTP. `skein mcp config` prints the
//! snippets that register it with those clients.

use std::io::IsTerminal;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Url;
use serde_json::{Value, json};
use skein_server::mcp::backend::{Answer, Backend, BoxFuture, Request, parse_answer};
use skein_server::mcp::{McpOptions, SkeinMcp};

use super::Ctx;
use super::client::{CliError, CliResult, Exit, root_cause, server_url};
use super::output::write_stdout;

#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// The byte budget of one tool result's telemetry (e.g. 16KiB, 64KiB);
    /// a longer result is cut and carries a cursor to continue.
    #[arg(long, value_name = "SIZE", default_value = "16KiB", value_parser = crate::serve::parse_size)]
    pub max_bytes: usize,
}

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Print the configuration that registers Skein's MCP server with an
    /// agent: Claude Code, Cursor, Codex, or any streamable-HTTP client.
    Config(ConfigArgs),
}

#[derive(Args, Debug)]
pub struct ConfigArgs {
    /// Only this client's snippet, as text to paste or pipe into its file.
    #[arg(long, value_enum)]
    pub client: Option<McpClient>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpClient {
    ClaudeCode,
    Cursor,
    Codex,
    Http,
}

pub fn run(ctx: &Ctx, args: &McpArgs) -> CliResult<Exit> {
    match &args.command {
        Some(McpCommand::Config(c)) => config(ctx, c),
        None => serve_stdio(ctx, args),
    }
}

/// The tools' backend in `skein mcp`: the REST API of a server over HTTP.
struct HttpBackend {
    base: Url,
    http: reqwest::Client,
    token: Option<String>,
}

impl HttpBackend {
    fn url(&self, request: &Request) -> Url {
        let mut u = self.base.clone();
        if let Ok(mut p) = u.path_segments_mut() {
            p.pop_if_empty();
            p.extend(&request.segments);
        }
        if !request.params.is_empty() {
            u.query_pairs_mut().extend_pairs(&request.params);
        }
        u
    }

    fn unreachable(&self, e: &reqwest::Error) -> String {
        let base = self.base.as_str().trim_end_matches('/');
        if e.is_timeout() {
            format!("no answer from the Skein server at {base} in time")
        } else {
            format!(
                "cannot reach the Skein server at {base} ({}); is `skein serve` running there? (skein mcp --server URL or SKEIN_SERVER)",
                root_cause(e)
            )
        }
    }
}

impl Backend for HttpBackend {
    fn get<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Answer, String>> {
        Box::pin(async move {
            let mut r = self.http.get(self.url(request));
            if let Some(t) = &self.token {
                r = r.bearer_auth(t);
            }
            let resp = r.send().await.map_err(|e| self.unreachable(&e))?;
            let status = resp.status().as_u16();
            let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
            parse_answer(status, &bytes)
        })
    }
}

fn serve_stdio(ctx: &Ctx, args: &McpArgs) -> CliResult<Exit> {
    let g = &ctx.global;
    let base = server_url(&g.server)?;
    let mut builder = reqwest::Client::builder();
    if let Some(path) = &g.ca_cert {
        for c in super::client::ca_certificates(path)? {
            builder = builder.add_root_certificate(c);
        }
    }
    let http = builder
        .timeout(g.timeout)
        .connect_timeout(g.timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("skein-mcp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CliError::new(Exit::Server, "client_error", e.to_string()))?;
    let backend = HttpBackend {
        base,
        http,
        token: g.token.clone().filter(|t| !t.is_empty()),
    };
    let options = McpOptions {
        max_bytes: args.max_bytes,
        skill: Some(super::skill::SKILL),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Exit::Server, "runtime", e.to_string()))?;
    runtime.block_on(async {
        use rmcp::ServiceExt;
        let running = SkeinMcp::new(backend, options)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::new(Exit::Server, "mcp", format!("MCP session failed to start: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| CliError::new(Exit::Server, "mcp", format!("MCP session ended: {e}")))?;
        Ok(Exit::Ok)
    })
}

/// The snippets of `skein mcp config`, for a server at `server` and this
/// binary at `exe`.
pub fn snippets(server: &str, exe: &str) -> Value {
    let http_url = format!("{}/mcp", server.trim_end_matches('/'));
    let stdio = json!({"command": exe, "args": ["mcp"], "env": {"SKEIN_SERVER": server}});
    let codex = format!(
        "# ~/.codex/config.toml\n[mcp_servers.skein]\ncommand = {}\nargs = [\"mcp\"]\nenv = {{ SKEIN_SERVER = {} }}\n",
        toml_string(exe),
        toml_string(server)
    );
    json!({
        "claude_code": {
            "command": format!("claude mcp add skein --env SKEIN_SERVER={server} -- {exe} mcp"),
            "http_command": format!("claude mcp add --transport http skein {http_url}"),
            "file": ".mcp.json",
            "json": {"mcpServers": {"skein": stdio}},
        },
        "cursor": {
            "file": "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            "json": {"mcpServers": {"skein": stdio}},
        },
        "codex": {"file": "~/.codex/config.toml", "toml": codex},
        "http": {"url": http_url, "transport": "streamable-http", "json": {"mcpServers": {"skein": {"type": "http", "url": http_url}}}},
    })
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn config(ctx: &Ctx, args: &ConfigArgs) -> CliResult<Exit> {
    let server = ctx.global.server.trim_end_matches('/').to_string();
    server_url(&server)?;
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(str::to_string))
        .unwrap_or_else(|| "skein".into());
    let all = snippets(&server, &exe);
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let text = match args.client {
        Some(McpClient::ClaudeCode) => format!(
            "{}\n\n# or, over HTTP to a running skein serve:\n{}\n",
            all["claude_code"]["command"].as_str().unwrap_or(""),
            all["claude_code"]["http_command"].as_str().unwrap_or("")
        ),
        Some(McpClient::Cursor) => pretty(&all["cursor"]["json"]),
        Some(McpClient::Codex) => all["codex"]["toml"].as_str().unwrap_or("").to_string(),
        Some(McpClient::Http) => pretty(&all["http"]["json"]),
        None if !std::io::stdout().is_terminal() => {
            ctx.out.json(&all)?;
            return Ok(Exit::Ok);
        }
        None => format!(
            "# Claude Code (stdio; or `{}`)\n{}\n\n# Cursor: {}\n{}\n\n{}\n# Any streamable-HTTP client: {}\n{}",
            all["claude_code"]["http_command"].as_str().unwrap_or(""),
            all["claude_code"]["command"].as_str().unwrap_or(""),
            all["cursor"]["file"].as_str().unwrap_or(""),
            pretty(&all["cursor"]["json"]),
            all["codex"]["toml"].as_str().unwrap_or(""),
            all["http"]["url"].as_str().unwrap_or(""),
            pretty(&all["http"]["json"]),
        ),
    };
    write_stdout(text.trim_end())?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_point_at_the_server_and_the_binary() {
        let s = snippets("http://127.0.0.1:7700", "/usr/bin/skein");
        assert_eq!(s["http"]["url"], "http://127.0.0.1:7700/mcp");
        assert_eq!(s["cursor"]["json"]["mcpServers"]["skein"]["command"], "/usr/bin/skein");
        assert_eq!(s["cursor"]["json"]["mcpServers"]["skein"]["args"], json!(["mcp"]));
        let toml = s["codex"]["toml"].as_str().unwrap();
        assert!(toml.contains("[mcp_servers.skein]\ncommand = \"/usr/bin/skein\""));
        assert!(
            s["claude_code"]["command"]
                .as_str()
                .unwrap()
                .ends_with("-- /usr/bin/skein mcp")
        );
    }
}
