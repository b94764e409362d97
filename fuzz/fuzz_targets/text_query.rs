//! The full-text query language (`text=` on the API, `--text` on the CLI)
//! and the promise both text indexes make: they only narrow. The input is
//! UTF-8: its first line is the query, every further line a value of the
//! record searched (the line's number picks its field).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_text::{BLOCK_ROWS, Field, MemTextIndex, PartTextIndex, PartTextIndexBuilder, Query};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let query = lines.next().unwrap_or_default();
    let q = match Query::parse(query) {
        Ok(q) => q,
        Err(e) => {
            // A syntax error names a place in the query.
            assert!(e.position <= query.len(), "{e} past the end of {query:?}");
            assert!(query.is_char_boundary(e.position), "{e} inside a character of {query:?}");
            return;
        }
    };
    let doc: Vec<(Field, &str)> = lines.enumerate().map(|(i, v)| (Field::ALL[i % Field::ALL.len()], v)).collect();
    let matches = q.matches(&doc);
    assert_eq!(q.matches(&doc), matches, "the model changed its mind");
    for h in q.highlights(&doc) {
        // Fragments are windows of a value the record holds, their ranges
        // in order, apart, and on characters.
        assert!(doc.iter().any(|(f, v)| *f == h.field && v.contains(h.fragment.as_str())));
        let mut end = 0;
        for &(s, e) in &h.ranges {
            assert!(end <= s && s < e && e <= h.fragment.len(), "{:?}", h.ranges);
            assert!(h.fragment.is_char_boundary(s) && h.fragment.is_char_boundary(e));
            end = e;
        }
    }
    if !matches {
        return;
    }
    // The record is a hit: both indexes must name its row.
    let row = 3 * BLOCK_ROWS + 1;
    let mut mem = MemTextIndex::new();
    mem.add(row, &doc);
    assert!(mem.search(&q).contains(row), "the hot index lost a hit of {query:?}");
    let mut part = PartTextIndexBuilder::new().expect("a builder");
    part.add(row, &doc).expect("a record indexes");
    let part = PartTextIndex::open(part.finish().expect("an index")).expect("its bundle opens");
    assert!(
        part.search(&q).expect("a search").contains(row),
        "a part's index lost a hit of {query:?}"
    );
});
