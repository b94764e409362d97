//! The web UI's files, embedded in the binary at build time (no Node, no
//! build step: the files under `crates/skein-server/ui/` are what the
//! browser runs), each with its content type, a strong ETag and a gzipped
//! copy made once on first use.

use std::io::Write;
use std::sync::OnceLock;

/// One embedded file.
pub struct Asset {
    /// The path under `/ui/` (or `index.html`, served for every page).
    pub path: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file of the UI. A test checks this list against the folder, so a
/// new file cannot be forgotten here.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", CSS),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("vendor/uPlot.min.css", CSS),
    asset!("vendor/uPlot.iife.min.js", JS),
    asset!("vendor/uPlot.LICENSE", "text/plain; charset=utf-8"),
    asset!("js/app.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/format.js", JS),
    asset!("js/url.js", JS),
    asset!("js/charts.js", JS),
    asset!("js/window.js", JS),
    asset!("js/pages/overview.js", JS),
    asset!("js/pages/traces.js", JS),
    asset!("js/pages/trace.js", JS),
    asset!("js/pages/waterfall.js", JS),
    asset!("js/pages/logs.js", JS),
    asset!("js/pages/metrics.js", JS),
    asset!("js/pages/llm.js", JS),
    asset!("js/pages/session.js", JS),
];

/// A file ready to send: its bytes, gzipped bytes and ETag.
pub struct Prepared {
    pub asset: &'static Asset,
    pub gzip: Vec<u8>,
    pub etag: String,
}

fn prepared() -> &'static [Prepared] {
    static ALL: OnceLock<Vec<Prepared>> = OnceLock::new();
    ALL.get_or_init(|| ASSETS.iter().map(prepare).collect())
}

fn prepare(asset: &'static Asset) -> Prepared {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail; an empty gzip copy would only mean the
    // plain bytes are sent.
    let gzip = z.write_all(asset.bytes).and_then(|_| z.finish()).unwrap_or_default();
    let hash = blake3::hash(asset.bytes).to_hex();
    Prepared {
        asset,
        gzip,
        etag: format!("\"{}\"", &hash.as_str()[..20]),
    }
}

/// The file at `path` (relative to the UI folder), if embedded.
pub fn get(path: &str) -> Option<&'static Prepared> {
    prepared().iter().find(|p| p.asset.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under ui/ is embedded, and nothing embedded is missing.
    #[test]
    fn the_asset_list_is_the_folder() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    on_disk.push(p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn gzip_copies_unpack_to_the_file() {
        use std::io::Read;
        for p in prepared() {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&p.gzip[..]).read_to_end(&mut out).unwrap();
            assert_eq!(out, p.asset.bytes, "{}", p.asset.path);
        }
    }
}
