//! `skein skill`: the agent skill file (SKILL.md) that teaches coding agents
//! when and how to debug with Skein. Its text is `SKILL.md` next to this
//! file and agrees with docs/cli.md.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;

use super::Ctx;
use super::client::{CliError, CliResult, Exit};
use super::output::write_stdout;

/// The skill file, as installed.
pub const SKILL: &str = include_str!("SKILL.md");

#[derive(Subcommand, Debug)]
pub enum SkillCommand {
    /// Write SKILL.md for coding agents: by default to the user's agent
    /// skills folder (~/.claude/skills/skein/SKILL.md); prints the path.
    /// Running it again rewrites nothing unless the text changed.
    Install(InstallArgs),
    /// Print the skill file.
    Show,
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Install for this project: .claude/skills/skein/SKILL.md under the git
    /// root of the current directory (or the current directory).
    #[arg(long, conflicts_with = "dir")]
    pub project: bool,
    /// Write SKILL.md into DIR instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The nearest ancestor of `dir` (itself included) holding `.git`.
pub fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.join(".git").exists()).map(Path::to_path_buf)
}

fn skill_dir_under(root: &Path) -> PathBuf {
    root.join(".claude").join("skills").join("skein")
}

/// Where `skill install` writes, per its flags.
pub fn target(args: &InstallArgs, cwd: &Path, home: Option<&Path>) -> CliResult<PathBuf> {
    let dir = if let Some(d) = &args.dir {
        cwd.join(d)
    } else if args.project {
        skill_dir_under(&git_root(cwd).unwrap_or_else(|| cwd.to_path_buf()))
    } else {
        let home = home.ok_or_else(|| CliError::usage("cannot tell the home directory: use --dir or --project"))?;
        skill_dir_under(home)
    };
    Ok(dir.join("SKILL.md"))
}

/// Writes `text` at `path` unless it is already there; whether it wrote.
pub fn install_at(path: &Path, text: &str) -> std::io::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

pub fn run(ctx: &Ctx, cmd: &SkillCommand) -> CliResult<Exit> {
    match cmd {
        SkillCommand::Show => {
            write_stdout(SKILL)?;
            Ok(Exit::Ok)
        }
        SkillCommand::Install(args) => {
            let cwd = std::env::current_dir().map_err(|e| {
                CliError::new(
                    Exit::Server,
                    "io_error",
                    format!("cannot read the current directory: {e}"),
                )
            })?;
            let path = target(args, &cwd, dirs::home_dir().as_deref())?;
            let changed = install_at(&path, SKILL).map_err(|e| {
                CliError::new(
                    Exit::Server,
                    "io_error",
                    format!("cannot write {}: {e}", path.display()),
                )
            })?;
            if ctx.out.table() {
                write_stdout(&path.display().to_string())?;
            } else {
                let v = json!({"path": path.display().to_string(), "changed": changed, "bytes": SKILL.len()});
                ctx.out.json(&ctx.out.trim(v, None))?;
            }
            Ok(Exit::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_the_flags() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let sub = repo.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let home = tmp.path().join("home");
        let args = |project, dir: Option<&str>| InstallArgs {
            project,
            dir: dir.map(PathBuf::from),
        };
        assert_eq!(
            target(&args(true, None), &sub, Some(&home)).unwrap(),
            repo.join(".claude/skills/skein/SKILL.md")
        );
        assert_eq!(
            target(&args(false, None), &sub, Some(&home)).unwrap(),
            home.join(".claude/skills/skein/SKILL.md")
        );
        assert_eq!(
            target(&args(false, Some("x")), &sub, None).unwrap(),
            sub.join("x/SKILL.md")
        );
        let outside = tmp.path().join("plain");
        std::fs::create_dir_all(&outside).unwrap();
        assert_eq!(
            target(&args(true, None), &outside, None).unwrap(),
            outside.join(".claude/skills/skein/SKILL.md")
        );
        assert!(target(&args(false, None), &sub, None).is_err());
    }

    #[test]
    fn installing_twice_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("d/SKILL.md");
        assert!(install_at(&path, "hello").unwrap());
        assert!(!install_at(&path, "hello").unwrap());
        assert!(install_at(&path, "hello 2").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello 2");
    }

    #[test]
    fn the_skill_has_front_matter_and_every_command() {
        assert!(SKILL.starts_with("---\nname: skein\ndescription: "));
        for cmd in [
            "skein status",
            "skein summarize",
            "skein anomalies",
            "skein services",
            "skein operations",
            "skein query spans",
            "skein query logs",
            "skein get trace",
            "skein correlate --trace",
            "skein tail",
            "skein watch",
        ] {
            assert!(SKILL.contains(cmd), "SKILL.md mentions {cmd}");
        }
    }
}
