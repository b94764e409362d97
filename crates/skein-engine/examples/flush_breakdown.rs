//! Times the stages of writing a part (to_batch, Parquet encode, index) on
//! 100k canonical spans: `cargo run --release --example flush_breakdown`.

use std::sync::Arc;
use std::time::Instant;

use skein_engine::part::Columnar;
use skein_engine::part::index::IndexBuilder;
use skein_model::Span;
use skein_model::corpus::Corpus;

fn main() {
    let c = Corpus::new(100_000, 1_767_225_600_000_000_000);
    let mut spans: Vec<Arc<Span>> = c.spans(0..10_000).into_iter().map(Arc::new).collect();
    spans.sort_by_key(|s| (s.start_time_unix_nano, s.trace_id, s.span_id));
    let refs: Vec<&Span> = spans.iter().map(|s| &**s).collect();
    for round in 0..3 {
        let t = Instant::now();
        let batches: Vec<_> = refs.chunks(8192).map(|ch| Span::to_batch(ch).unwrap()).collect();
        let to_batch = t.elapsed();
        let t = Instant::now();
        let mut buf = Vec::new();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(
                parquet::basic::ZstdLevel::try_new(1).unwrap(),
            ))
            .set_data_page_row_count_limit(1024)
            .set_write_batch_size(1024)
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, Span::schema(), Some(props)).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        let parquet = t.elapsed();
        let t = Instant::now();
        let mut ix = IndexBuilder::default();
        for s in &refs {
            ix.add(*s);
        }
        let _ = ix.finish();
        let index = t.elapsed();
        let t = Instant::now();
        let mut json = 0usize;
        for s in &refs {
            json += skein_model::json::to_json_string(&skein_model::json::OtlpAttrs(&s.attributes)).len();
        }
        let attrs_json = t.elapsed();
        println!(
            "round {round}: to_batch {:?} ({:.2} us/span; attrs JSON alone {:.2}), parquet {:?} ({:.2} us/span, {} bytes), index {:?} ({:.2} us/span) [{json}]",
            to_batch,
            to_batch.as_secs_f64() * 1e6 / refs.len() as f64,
            attrs_json.as_secs_f64() * 1e6 / refs.len() as f64,
            parquet,
            parquet.as_secs_f64() * 1e6 / refs.len() as f64,
            buf.len(),
            index,
            index.as_secs_f64() * 1e6 / refs.len() as f64
        );
    }
}
