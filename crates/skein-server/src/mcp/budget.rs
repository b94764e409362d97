//! Caps on a tool's result: a byte budget (the result's main list cut to
//! the items that fit, long values shortened when even one item does not),
//! and the cursor that continues where a cut or a `limit` stopped.
//!
//! The cursor is opaque to the agent: the tool it belongs to, the API's own
//! cursor of the page (where the API pages), and how many items of that
//! page (or of the whole list, where the API does not page) were returned
//! already.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a tool's main list pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// One object, no list to page (`status`, `get_span`).
    None,
    /// The API pages (`limit`, `cursor`, `next_cursor`): ask it for
    /// `offset + limit` items from its cursor and skip `offset`.
    Api,
    /// The API answers the whole list: page it here by offset.
    Made,
}

/// Where to continue. Serialized small (`t`, `a`, `o`) and base64url-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "t")]
    pub tool: String,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    #[serde(rename = "o", default)]
    pub offset: usize,
}

const PREFIX: &str = "mcp1.";

impl Cursor {
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
    }

    /// The cursor `text` of `tool`; the error says what is wrong with it.
    pub fn decode(tool: &str, text: &str) -> Result<Cursor, String> {
        let bad =
            || format!("{text:?} is not a cursor of this server; pass a next_cursor exactly as {tool} returned it");
        let encoded = text.strip_prefix(PREFIX).ok_or_else(bad)?;
        let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| bad())?;
        let c: Cursor = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if c.tool != tool {
            return Err(format!(
                "this cursor belongs to {}, not {tool}; pass it to {} with the same arguments",
                c.tool, c.tool
            ));
        }
        Ok(c)
    }
}

/// The page one call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub api_cursor: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

impl Page {
    /// The `limit` to ask the API for (its maximum is 10000).
    pub fn api_limit(&self) -> usize {
        (self.offset + self.limit).min(10_000)
    }

    /// Applies the page to the API's list: skips what was returned before
    /// and, for a list the API does not page, keeps `limit` items. Returns
    /// whether items remain past the page (for [`Paging::Made`]).
    pub fn select(&self, paging: Paging, items: &mut Vec<Value>) -> bool {
        let skip = self.offset.min(items.len());
        items.drain(..skip);
        if paging == Paging::Made && items.len() > self.limit {
            items.truncate(self.limit);
            return true;
        }
        false
    }

    /// The cursor after returning `kept` of the page's `shown` items:
    /// inside the page when the budget cut it, else the API's next page
    /// (`api_next`) or, for a made list, the items past the page (`more`).
    pub fn next(
        &self,
        tool: &str,
        paging: Paging,
        kept: usize,
        shown: usize,
        api_next: Option<String>,
        more: bool,
    ) -> Option<Cursor> {
        let here = |offset| Cursor {
            tool: tool.to_string(),
            api: self.api_cursor.clone(),
            offset,
        };
        match paging {
            Paging::None => None,
            _ if kept < shown => Some(here(self.offset + kept)),
            Paging::Api => api_next.map(|a| Cursor {
                tool: tool.to_string(),
                api: Some(a),
                offset: 0,
            }),
            Paging::Made => more.then(|| here(self.offset + kept)),
        }
    }
}

/// What [`fit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// Items of the list kept (all of them when nothing was cut).
    pub kept: usize,
    /// Items of the list before the cut.
    pub shown: usize,
    /// Long strings or nested lists were shortened.
    pub shortened: bool,
}

impl Fit {
    pub fn cut(&self) -> bool {
        self.kept < self.shown || self.shortened
    }
}

fn size(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// Cuts `data` to at most `max_bytes` of JSON: first the list at key
/// `list` to the items that fit (at least one, so a cursor always moves
/// on), then long strings and nested lists, shorter and shorter.
pub fn fit(data: &mut Value, list: Option<&str>, max_bytes: usize) -> Fit {
    let items = list
        .and_then(|k| data.get_mut(k))
        .and_then(Value::as_array_mut)
        .map(std::mem::take);
    let shown = items.as_ref().map_or(0, Vec::len);
    let mut kept = shown;
    if let (Some(mut items), Some(key)) = (items, list) {
        let base = size(data);
        let mut used = base;
        let mut n = 0;
        for item in &items {
            let s = size(item) + usize::from(n > 0);
            if used + s > max_bytes && n > 0 {
                break;
            }
            used += s;
            n += 1;
        }
        items.truncate(n);
        kept = n;
        data[key] = Value::Array(items);
    }
    let mut shortened = false;
    for cap in [1024, 256, 64, 16] {
        if size(data) <= max_bytes {
            break;
        }
        shorten(data, cap);
        shortened = true;
    }
    Fit { kept, shown, shortened }
}

/// Cuts strings longer than `cap` bytes and lists longer than `cap / 8`
/// items (at least 2), saying what was left out.
fn shorten(v: &mut Value, cap: usize) {
    match v {
        Value::String(s) if s.len() > cap => {
            let mut end = cap;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let left = s.len() - end;
            s.truncate(end);
            s.push_str(&format!("…[{left} more bytes cut]"));
        }
        Value::Array(a) => {
            let keep = (cap / 8).max(2);
            if a.len() > keep {
                let left = a.len() - keep;
                a.truncate(keep);
                a.push(Value::String(format!("…[{left} more items cut]")));
            }
            a.iter_mut().for_each(|x| shorten(x, cap));
        }
        Value::Object(m) => m.values_mut().for_each(|x| shorten(x, cap)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cursors_round_trip_and_belong_to_one_tool() {
        let c = Cursor {
            tool: "search_logs".into(),
            api: Some("abc".into()),
            offset: 7,
        };
        let text = c.encode();
        assert!(text.starts_with("mcp1."));
        assert_eq!(Cursor::decode("search_logs", &text).unwrap(), c);
        assert!(
            Cursor::decode("search_spans", &text)
                .unwrap_err()
                .contains("belongs to search_logs")
        );
        assert!(
            Cursor::decode("search_logs", "garbage")
                .unwrap_err()
                .contains("not a cursor")
        );
        assert!(Cursor::decode("search_logs", "mcp1.!!").is_err());
        assert!(Cursor::decode("search_logs", "mcp1.e30").is_err());
    }

    fn items(n: usize, each: usize) -> Value {
        let list: Vec<Value> = (0..n).map(|i| json!({"i": i, "s": "x".repeat(each)})).collect();
        json!({"logs": list, "window": {"start": 1}})
    }

    #[test]
    fn a_list_is_cut_to_the_items_that_fit() {
        let mut v = items(100, 100);
        let f = fit(&mut v, Some("logs"), 2048);
        assert!(f.kept > 5 && f.kept < 20, "{f:?}");
        assert_eq!((f.shown, f.shortened), (100, false));
        assert!(size(&v) <= 2048);
        assert_eq!(v["logs"].as_array().unwrap().len(), f.kept);
        assert_eq!(v["window"]["start"], 1);

        let mut small = items(3, 10);
        let f = fit(&mut small, Some("logs"), 16384);
        assert_eq!((f.kept, f.shown, f.cut()), (3, 3, false));
    }

    #[test]
    fn one_item_too_big_is_kept_shortened() {
        let mut v = items(2, 50_000);
        let f = fit(&mut v, Some("logs"), 4096);
        assert_eq!((f.kept, f.shown, f.shortened), (1, 2, true));
        assert!(size(&v) <= 4096);
        assert!(v["logs"][0]["s"].as_str().unwrap().ends_with("more bytes cut]"));

        let mut multibyte = json!({"s": "é".repeat(10_000)});
        let f = fit(&mut multibyte, None, 1000);
        assert!(f.shortened && size(&multibyte) <= 1000);
    }

    #[test]
    fn pages_continue_where_they_stopped() {
        // The API pages: a cut inside the page stays on it, else its next page.
        let p = Page {
            api_cursor: Some("c1".into()),
            offset: 5,
            limit: 20,
        };
        assert_eq!(p.api_limit(), 25);
        let mut list: Vec<Value> = (0..25).map(|i| json!(i)).collect();
        assert!(!p.select(Paging::Api, &mut list));
        assert_eq!((list.len(), &list[0]), (20, &json!(5)));
        let inside = p.next("t", Paging::Api, 8, 20, Some("c2".into()), false).unwrap();
        assert_eq!((inside.api.as_deref(), inside.offset), (Some("c1"), 13));
        let next = p.next("t", Paging::Api, 20, 20, Some("c2".into()), false).unwrap();
        assert_eq!((next.api.as_deref(), next.offset), (Some("c2"), 0));
        assert_eq!(p.next("t", Paging::Api, 20, 20, None, false), None);

        // A made list: offsets over the whole answer.
        let p = Page {
            api_cursor: None,
            offset: 10,
            limit: 10,
        };
        let mut list: Vec<Value> = (0..25).map(|i| json!(i)).collect();
        assert!(p.select(Paging::Made, &mut list));
        assert_eq!((list.len(), &list[0]), (10, &json!(10)));
        assert_eq!(p.next("t", Paging::Made, 10, 10, None, true).unwrap().offset, 20);
        assert_eq!(p.next("t", Paging::Made, 4, 10, None, true).unwrap().offset, 14);
        let mut tail: Vec<Value> = (0..15).map(|i| json!(i)).collect();
        assert!(!p.select(Paging::Made, &mut tail));
        assert_eq!(p.next("t", Paging::Made, 5, 5, None, false), None);
        assert_eq!(p.next("t", Paging::None, 0, 1, None, true), None);
    }
}
