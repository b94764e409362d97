//! Criterion micro-benchmarks of the engine's hot paths. Run with
//! `cargo bench -p skein-engine` (release profile); `SKEIN_BENCH_SPANS`
//! sets the size of the query corpus (default 1,000,000).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use skein_engine::part::{PartMeta, PartWriter, WriterOptions};
use skein_engine::storage::{LocalStore, PartStore};
use skein_engine::wal::Wal;
use skein_engine::{AttrFilter, AttrScope, Engine, EngineOptions, Signal, SpanQuery, Window, codec};
use skein_engine::{Durability, RecoveryMode};
use skein_model::Span;
use skein_model::corpus::Corpus;

fn corpus(spans: u64) -> Corpus {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    Corpus::new(spans, now)
}

fn batches(c: &Corpus, from_trace: u64, n: usize) -> Vec<Vec<Span>> {
    (0..n as u64)
        .map(|b| c.spans(from_trace + b * 100..from_trace + (b + 1) * 100))
        .collect()
}

/// 100 batches of 1,000 spans through `ingest_spans`, from 4 writer
/// threads sharing fsyncs (group commit), durability fsync.
fn ingest(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(EngineOptions::new(dir.path())).unwrap());
    let corpus = corpus(100_000_000);
    let mut next_trace = 0;
    let mut g = c.benchmark_group("ingest");
    g.throughput(Throughput::Elements(100_000));
    g.sample_size(10);
    g.bench_function("100x1000_spans_4_writers_fsync", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let work = Arc::new(batches(&corpus, next_trace, 100));
                next_trace += 10_000;
                let next = Arc::new(AtomicUsize::new(0));
                let started = Instant::now();
                let threads: Vec<_> = (0..4)
                    .map(|_| {
                        let (engine, work, next) = (engine.clone(), work.clone(), next.clone());
                        std::thread::spawn(move || {
                            while let Some(batch) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                                engine.ingest_spans(batch.clone()).unwrap();
                            }
                        })
                    })
                    .collect();
                for t in threads {
                    t.join().unwrap();
                }
                total += started.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn wal_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), Durability::Fsync, 1, RecoveryMode::Strict, |_| Ok(())).unwrap();
    let body = codec::encode_batch(&corpus(1000).spans(0..100)).unwrap();
    let mut g = c.benchmark_group("wal");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("append_1000_spans_fsync", |b| {
        b.iter(|| wal.append(Signal::Spans, 1000, &body).unwrap())
    });
    g.finish();
}

fn codec_batch(c: &mut Criterion) {
    let spans = corpus(1000).spans(0..100);
    let bytes = codec::encode_batch(&spans).unwrap();
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("encode_1000_spans", |b| b.iter(|| codec::encode_batch(&spans).unwrap()));
    g.bench_function("decode_1000_spans", |b| {
        b.iter(|| codec::decode_batch::<Span>(&bytes).unwrap())
    });
    // As SDKs and collectors send them: one envelope per resource.
    let mut grouped = spans.clone();
    grouped.sort_by(|a, b| a.service_name().cmp(b.service_name()));
    let req = skein_model::otlp::spans_to_otlp(&grouped);
    let pb = prost::Message::encode_to_vec(&req);
    type Req = skein_model::otlp::proto::collector::trace::v1::ExportTraceServiceRequest;
    g.bench_function("otlp_protobuf_decode_1000_spans", |b| {
        b.iter(|| <Req as prost::Message>::decode(pb.as_slice()).unwrap())
    });
    g.bench_function("otlp_convert_1000_spans", |b| {
        b.iter_batched(
            || <Req as prost::Message>::decode(pb.as_slice()).unwrap(),
            skein_model::otlp::spans_from_otlp,
            BatchSize::SmallInput,
        )
    });
    // Into a table that fills up to a flush-sized tier (80 batches), as
    // ingest does; an empty table would time only first inserts.
    let filling = batches(&corpus(80_000), 0, 80);
    g.bench_function("memtable_insert_1000_spans", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut m = skein_engine::hot::MemTable::<Span>::default();
            for i in 0..iters as usize {
                if i % filling.len() == 0 {
                    m = skein_engine::hot::MemTable::default();
                }
                let batch = filling[i % filling.len()].clone();
                let started = Instant::now();
                m.insert(batch, 1 + i as u64 * 1000);
                total += started.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn part_write(c: &mut Criterion) {
    // A frozen hot tier of 100k spans, written as a flush writes it: the
    // tier's own index renumbered, the fast zstd level.
    let mut table = skein_engine::hot::MemTable::<Span>::default();
    table.insert(corpus(100_000).spans(0..10_000), 1);
    let opts = WriterOptions::default();
    let opts = WriterOptions {
        zstd_level: opts.flush_zstd_level,
        ..opts
    };
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn PartStore> = Arc::new(LocalStore::open(dir.path(), &["spans"]).unwrap());
    let mut id = 0;
    let mut g = c.benchmark_group("part");
    g.throughput(Throughput::Elements(table.live_rows() as u64));
    g.sample_size(10);
    g.bench_function("flush_100k_spans", |b| {
        b.iter_batched(
            || {
                id += 1;
                id
            },
            |id| {
                let meta = PartMeta::new(Signal::Spans, id);
                let (rows, index) = table.sorted_live_keyed();
                let mut w = PartWriter::<Span>::new(store.clone(), meta, &opts)
                    .unwrap()
                    .with_index(index);
                for (s, key) in rows {
                    w.push_keyed(s, key).unwrap();
                }
                w.finish().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn compaction(c: &mut Criterion) {
    let corpus = corpus(1_000_000);
    let mut g = c.benchmark_group("compaction");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("merge_4_parts_of_25k_spans", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let mut o = EngineOptions::new(dir.path());
                o.background = false;
                let e = Engine::open(o).unwrap();
                for p in 0..4 {
                    for b in batches(&corpus, p * 2500, 25) {
                        e.ingest_spans(b).unwrap();
                    }
                    e.flush().unwrap();
                }
                let started = Instant::now();
                e.compact().unwrap();
                total += started.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// Queries on the canonical corpus, spread over parts and the hot tier.
fn queries(c: &mut Criterion) {
    let spans: u64 = std::env::var("SKEIN_BENCH_SPANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let corpus = corpus(spans);
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(EngineOptions::new(dir.path())).unwrap();
    let n = corpus.traces / 100;
    for (i, b) in (0..n).map(|b| corpus.spans(b * 100..(b + 1) * 100)).enumerate() {
        e.ingest_spans(b).unwrap();
        // Most data in parts, the newest 10% in the hot tier.
        if i as u64 == n * 9 / 10 {
            e.flush().unwrap();
            e.compact().unwrap();
        }
    }
    let mut g = c.benchmark_group("query");
    let mut i = 0u64;
    g.bench_function("get_trace", |b| {
        b.iter(|| {
            i = (i + 7919) % corpus.traces;
            let t = e.get_trace(corpus.trace_id(i)).unwrap();
            assert_eq!(t.spans.len(), 10);
        })
    });
    let mut gi = 0u64;
    g.bench_function("attribute_search_limit_100", |b| {
        b.iter(|| {
            gi = (gi + 1) % corpus.groups;
            let q = SpanQuery {
                attributes: vec![AttrFilter::eq(
                    AttrScope::Record,
                    "benchmark.group",
                    format!("group-{gi}"),
                )],
                limit: 100,
                ..Default::default()
            };
            assert_eq!(e.search_spans(&q).unwrap().records.len(), 100);
        })
    });
    g.sample_size(20);
    g.bench_function("services", |b| b.iter(|| e.services(Window::ALL).unwrap()));
    g.finish();
}

/// LLM queries on the agent corpus (`SKEIN_BENCH_SPANS` spans, default
/// 1M): the session list, usage by model and one session, most data in
/// parts and the newest 10% in the hot tier (as `skein-bench e2e` leaves
/// it).
fn llm_queries(c: &mut Criterion) {
    use skein_engine::UsageGroupBy;
    use skein_model::corpus::agent::AgentCorpus;
    let spans: u64 = std::env::var("SKEIN_BENCH_SPANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let corpus = AgentCorpus::new(spans, now);
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(EngineOptions::new(dir.path())).unwrap();
    let batches = corpus.traces.div_ceil(200);
    for b in 0..batches {
        let end = ((b + 1) * 200).min(corpus.traces);
        e.ingest_spans(corpus.spans(b * 200..end)).unwrap();
        if b == batches * 9 / 10 {
            e.flush().unwrap();
            e.compact().unwrap();
        }
    }
    let first = e.sessions(Window::ALL, 50, None).unwrap().0;
    assert_eq!(first.sessions.len(), 50);
    let id = first.sessions[7].session_id.clone();
    let mut g = c.benchmark_group("llm");
    g.sample_size(20);
    g.bench_function("session_list_limit_50", |b| {
        b.iter(|| assert_eq!(e.sessions(Window::ALL, 50, None).unwrap().0.sessions.len(), 50))
    });
    g.bench_function("usage_by_model", |b| {
        b.iter(|| e.llm_usage(Window::ALL, UsageGroupBy::Model, false).unwrap())
    });
    g.bench_function("one_session", |b| {
        b.iter(|| assert!(e.session(&id, Window::ALL).unwrap().is_some()))
    });
    g.finish();
}

criterion_group!(
    benches,
    codec_batch,
    wal_append,
    part_write,
    compaction,
    ingest,
    queries,
    llm_queries
);
criterion_main!(benches);
