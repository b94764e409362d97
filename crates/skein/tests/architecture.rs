//! The workspace's layering, checked: crates depend one way
//! (skein-model → skein-engine → skein-server → skein, skein-bench beside
//! them), and inside each crate no two modules import each other, directly
//! or around a circle. A module may use its own parent or children (`mod.rs`
//! re-exporting a child, a child using its parent's items); everything else
//! runs one way.
//!
//! The scan reads `crate::`, `super::` and `self::` paths from each source
//! file with comments, strings and `#[cfg(test)]` items left out (tests may
//! reach anywhere), and resolves each path to the longest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace crates, lowest layer first; a crate may depend on those
/// before it only. `skein-text` (full-text indexing) knows nothing of the
/// others, `skein-promql` (PromQL) only the model; `skein-bench` sits beside the binary.
const LAYERS: &[(&str, &[&str])] = &[
    ("skein-text", &[]),
    ("skein-model", &[]),
    ("skein-promql", &["skein-model"]),
    ("skein-engine", &["skein-model", "skein-text"]),
    ("skein-sql", &["skein-model", "skein-engine"]),
    (
        "skein-server",
        &["skein-model", "skein-engine", "skein-text", "skein-promql", "skein-sql"],
    ),
    ("skein", &["skein-model", "skein-engine", "skein-server", "skein-text"]),
    (
        "skein-bench",
        &["skein-model", "skein-engine", "skein-server", "skein-text"],
    ),
];

#[test]
fn crates_depend_one_way() {
    let names: Vec<&str> = LAYERS.iter().map(|(n, _)| *n).collect();
    for (name, allowed) in LAYERS {
        let toml = fs::read_to_string(workspace().join("crates").join(name).join("Cargo.toml")).unwrap();
        for line in toml.lines() {
            let key = line.split(['=', '.']).next().unwrap_or("").trim();
            if key != *name && names.contains(&key) {
                assert!(
                    allowed.contains(&key),
                    "{name} depends on {key} (in Cargo.toml: {line:?}); the layers are {names:?}"
                );
            }
        }
    }
}

#[test]
fn no_import_circles_inside_a_crate() {
    let mut circles = Vec::new();
    for (name, _) in LAYERS {
        let src = workspace().join("crates").join(name).join("src");
        let graph = module_graph(&src);
        for circle in strongly_connected(&graph) {
            let edges: Vec<String> = circle
                .iter()
                .map(|m| {
                    let to: Vec<&String> = graph[m].iter().filter(|t| circle.contains(t)).collect();
                    format!("{m} -> {to:?}")
                })
                .collect();
            circles.push(format!("{name}: {}", edges.join("; ")));
        }
    }
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

/// The checker finds a circle when there is one, and lets a parent and its
/// child use each other.
#[test]
fn the_checker_sees_circles() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    write("lib.rs", "mod a; mod b; mod c; mod p;");
    write(
        "a.rs",
        "use crate::b::Thing;\n// crate::c::Not in a comment\nconst S: &str = \"crate::c\";",
    );
    write("b.rs", "use crate::{c::{self, More}, a};\npub struct Thing;");
    write("c.rs", "#[cfg(test)]\nmod tests { use crate::a::X; }\npub struct More;");
    write("p/mod.rs", "pub mod child; pub use child::Item;");
    write(
        "p/child.rs",
        "use super::super::c::More; use super::Other; pub struct Item;",
    );
    let g = module_graph(dir.path());
    assert_eq!(g["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["a".to_string(), "c".to_string()]));
    assert!(g["c"].is_empty(), "test modules are left out: {:?}", g["c"]);
    assert_eq!(g["p::child"], BTreeSet::from(["c".to_string()]));
    let circles = strongly_connected(&g);
    assert_eq!(circles, vec![vec!["a".to_string(), "b".to_string()]]);
}

// ------------------------------------------------------------------ the scan

/// Module path (`part::index`, "" for the crate root) → the modules it uses.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    collect(src, src, &mut files);
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let code = without_test_items(&code_only(&fs::read_to_string(path).unwrap()));
        let mut uses = BTreeSet::new();
        for p in paths(&code) {
            if let Some(target) = resolve(&modules, module, &p)
                && target != *module
                && !target.is_empty()
                && !is_family(module, &target)
            {
                uses.insert(target);
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

fn collect(src: &Path, dir: &Path, out: &mut BTreeMap<String, PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
}

/// A parent and its descendants may use each other.
fn is_family(a: &str, b: &str) -> bool {
    a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

/// The source with comments, string and char literals blanked out.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body + rest[body..].find(&close).map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(rest).is_some() {
            i += char_literal_len(rest).unwrap_or(1);
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, `br##"`…: the number of hashes.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.len() - s.trim_start_matches('#').len();
    s[hashes..].starts_with('"').then_some(hashes)
}

/// The length of a char literal at the start of `s` (`'a'`, `'\n'`,
/// `'\u{7f}'`), or `None` for a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, c) = chars.next()?;
    if c == '\\' {
        return s[2..].find('\'').map(|e| e + 3);
    }
    let (at, close) = chars.next()?;
    (close == '\'').then_some(at + 1)
}

/// The code with each `#[cfg(test)]` item (up to its closing brace or
/// semicolon) left out.
fn without_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let b = item.as_bytes();
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, &c) in b.iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every `crate::…`, `super::…` and `self::…` path, with `{a, b::c}` groups
/// expanded to one path per member.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|p| code[i..].starts_with(p));
        if starts && (i == 0 || !is_ident(b[i - 1]) && b[i - 1] != b':') {
            i = path_at(code, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads the path starting at `i` (after `prefix`), pushing each full path
/// to `out`; returns where it ends.
fn path_at(code: &str, mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            i += 1;
            loop {
                while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    out.push(prefix.clone());
                    return i + 1;
                }
                i = path_at(code, i, prefix.clone(), out);
            }
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        if start == i {
            out.push(prefix);
            return i.max(start + 1);
        }
        prefix.push(code[start..i].to_string());
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(prefix);
            return i;
        }
    }
}

/// The longest module that `path`, used in `from`, names.
fn resolve(modules: &BTreeSet<String>, from: &str, path: &[String]) -> Option<String> {
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    let mut segs = path;
    match segs.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            segs = &segs[1..];
        }
        Some("self") => segs = &segs[1..],
        Some("super") => {
            while segs.first().is_some_and(|s| s == "super") {
                base.pop();
                segs = &segs[1..];
            }
        }
        _ => return None,
    }
    (0..=segs.len()).rev().find_map(|k| {
        let mut m: Vec<&str> = base.clone();
        m.extend(segs[..k].iter().map(String::as_str).filter(|s| *s != "self"));
        let m = m.join("::");
        modules.contains(&m).then_some(m)
    })
}

/// The strongly connected components of more than one module (Tarjan),
/// each sorted, in sorted order.
fn strongly_connected(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, n: &'a str) {
            let i = self.index.len();
            self.index.insert(n, i);
            self.low.insert(n, i);
            self.stack.push(n);
            self.on_stack.insert(n);
            for w in self.g.get(n).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    self.low.entry(n).and_modify(|l| *l = (*l).min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    self.low.entry(n).and_modify(|l| *l = (*l).min(iw));
                }
            }
            if self.low[n] == self.index[n] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    comp.push(w.to_string());
                    if w == n {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in g.keys() {
        if !t.index.contains_key(n.as_str()) {
            t.visit(n);
        }
    }
    t.out.sort();
    t.out
}
