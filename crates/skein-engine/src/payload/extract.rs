//! Which values become payloads, and taking them out of records at ingest
//! (and putting them back for `payloads=inline`).

use std::sync::Arc;

use skein_model::{AnyValue, KeyValue, Resource, genai};

use super::{Blob, FrameBuilder, PayloadRef, as_ref_value, binary_ref_value, is_binary_ref, ref_value};
use crate::error::Result;
use crate::hash::{FastMap, FastSet};
use crate::record::Record;

/// Which string values are stored as payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadPolicy {
    /// Strings longer than this many bytes (span, event and resource
    /// attributes, log bodies). 0 turns the payload store off.
    pub threshold: usize,
    /// GenAI content attributes ([`genai::CONTENT`]) longer than this.
    pub content_min: usize,
}

impl Default for PayloadPolicy {
    fn default() -> Self {
        PayloadPolicy {
            threshold: 4096,
            content_min: 256,
        }
    }
}

impl PayloadPolicy {
    /// Whether the string `s` under attribute `key` (`None`: a log body)
    /// is stored as a payload.
    pub fn selects(&self, key: Option<&str>, s: &str) -> bool {
        self.selects_len(key, s.len())
    }

    /// Whether a string or bytes value of `len` bytes under `key` is stored
    /// as a payload.
    pub fn selects_len(&self, key: Option<&str>, len: usize) -> bool {
        self.threshold > 0 && (len > self.threshold || key.is_some_and(genai::is_content_key) && len > self.content_min)
    }
}

/// Replaces the values `policy` selects in `records` with references.
/// Returns the payloads to store: each once, and only those `known` says
/// are not stored already, compressed together in frames (see
/// [`Frame`](super::Frame)).
pub fn extract<R: Record>(
    records: &mut [R],
    policy: &PayloadPolicy,
    known: &dyn Fn(&PayloadRef) -> bool,
) -> Result<Vec<Blob>> {
    let mut out = Extraction {
        policy,
        known,
        seen: FastSet::default(),
        frames: FrameBuilder::default(),
    };
    if policy.threshold == 0 {
        return Ok(Vec::new());
    }
    // Resources are shared by the records of a batch: each is rewritten
    // once, and every record sharing it gets the rewritten one.
    let mut resources: FastMap<usize, Option<Arc<Resource>>> = FastMap::default();
    for r in records.iter_mut() {
        let res = r.resource();
        let replaced = match resources.get(&(Arc::as_ptr(res) as usize)) {
            Some(done) => done.clone(),
            None => {
                let mut attrs = res.attributes.clone();
                let changed = out.attrs(&mut attrs)?;
                let new = changed.then(|| {
                    Arc::new(Resource {
                        attributes: attrs,
                        ..(**res).clone()
                    })
                });
                resources.insert(Arc::as_ptr(res) as usize, new.clone());
                new
            }
        };
        if let Some(res) = replaced {
            let (scope, metric) = (r.scope().clone(), r.metric_desc().cloned());
            r.attach(res, scope, metric);
        }
        let mut failed = None;
        r.payload_slots(&mut |key, v| {
            if failed.is_none()
                && let Err(e) = out.value(key, v)
            {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    out.frames.finish()
}

struct Extraction<'a> {
    policy: &'a PayloadPolicy,
    known: &'a dyn Fn(&PayloadRef) -> bool,
    seen: FastSet<PayloadRef>,
    frames: FrameBuilder,
}

impl Extraction<'_> {
    fn attrs(&mut self, attrs: &mut [KeyValue]) -> Result<bool> {
        let mut changed = false;
        for kv in attrs {
            changed |= self.value(Some(&kv.key), &mut kv.value)?;
        }
        Ok(changed)
    }

    fn value(&mut self, key: Option<&str>, v: &mut AnyValue) -> Result<bool> {
        let (bytes, binary) = match &*v {
            AnyValue::Str(s) => (s.as_bytes(), false),
            AnyValue::Bytes(b) => (b.as_slice(), true),
            _ => return Ok(false),
        };
        if !self.policy.selects_len(key, bytes.len()) {
            return Ok(false);
        }
        let id = PayloadRef::of(bytes);
        if !(self.known)(&id) && self.seen.insert(id) {
            self.frames.push(id, bytes)?;
        }
        let reference = match &*v {
            AnyValue::Str(s) if !binary => ref_value(id, s),
            _ => binary_ref_value(id, bytes),
        };
        *v = reference;
        Ok(true)
    }
}

/// Puts payloads back in place of their references in `r`, fetching each
/// with `fetch` (`None`: not found, the reference stays): a string as the
/// string it was, a binary value as bytes.
pub fn inline<R: Record>(r: &mut R, fetch: &dyn Fn(&PayloadRef) -> Result<Option<Vec<u8>>>) -> Result<()> {
    let mut failed = None;
    let mut put_back = |v: &mut AnyValue| {
        let Some((id, _)) = as_ref_value(v) else { return };
        match fetch(&id) {
            Ok(Some(bytes)) if is_binary_ref(v) => *v = AnyValue::Bytes(bytes),
            // Stored from a string, checked against its hash on read: UTF-8.
            Ok(Some(bytes)) => {
                *v = AnyValue::Str(
                    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
                )
            }
            Ok(None) => {}
            Err(e) => failed = failed.take().or(Some(e)),
        }
    };
    if r.resource()
        .attributes
        .iter()
        .any(|kv| as_ref_value(&kv.value).is_some())
    {
        let mut res = (**r.resource()).clone();
        res.attributes.iter_mut().for_each(|kv| put_back(&mut kv.value));
        let (scope, metric) = (r.scope().clone(), r.metric_desc().cloned());
        r.attach(Arc::new(res), scope, metric);
    }
    r.payload_slots(&mut |_, v| put_back(v));
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn the_policy_picks_big_strings_and_content() {
        let p = PayloadPolicy::default();
        let long = "x".repeat(4097);
        assert!(p.selects(Some("http.url"), &long));
        assert!(!p.selects(Some("http.url"), &long[..4096]));
        assert!(p.selects(None, &long), "log bodies too");
        assert!(p.selects(Some("gen_ai.input.messages"), &long[..257]));
        assert!(!p.selects(Some("gen_ai.input.messages"), &long[..256]));
        assert!(!p.selects(Some("gen_ai.request.model"), &long[..300]));
        let off = PayloadPolicy { threshold: 0, ..p };
        assert!(!off.selects(Some("gen_ai.input.messages"), &long));
    }

    #[test]
    fn binary_values_are_payloads_and_come_back_as_bytes() {
        let mut logs = testdata::logs(2);
        let blob: Vec<u8> = (0..5000u32).map(|i| (i % 256) as u8).collect();
        logs[0].body = AnyValue::Bytes(blob.clone());
        logs[1].body = AnyValue::Bytes(blob[..100].to_vec());
        let blobs = extract(&mut logs, &PayloadPolicy::default(), &|_| false).unwrap();
        assert_eq!(blobs.len(), 1, "only the big one");
        assert!(super::is_binary_ref(&logs[0].body), "{:?}", logs[0].body);
        assert_eq!(as_ref_value(&logs[0].body).map(|(_, n)| n), Some(5000));
        assert_eq!(logs[1].body, AnyValue::Bytes(blob[..100].to_vec()));
        let stored = blobs[0].decompress("test").unwrap();
        inline(&mut logs[0], &|_| Ok(Some(stored.clone()))).unwrap();
        assert_eq!(logs[0].body, AnyValue::Bytes(blob));
    }

    #[test]
    fn extracting_then_inlining_gives_the_records_back() {
        let mut spans = testdata::spans(2, 3);
        let prompt = "system: be brief. ".repeat(30);
        let big = "y".repeat(5000);
        for s in &mut spans {
            s.attributes
                .push(KeyValue::new("gen_ai.input.messages", prompt.clone()));
            s.events.push(skein_model::Event {
                name: "exception".into(),
                attributes: vec![KeyValue::new("exception.stacktrace", big.clone())],
                ..Default::default()
            });
        }
        let res = Arc::new(Resource {
            attributes: vec![KeyValue::new("process.command_line", big.clone())],
            ..(*spans[0].resource).clone()
        });
        for s in &mut spans {
            s.resource = res.clone();
        }
        let original = spans.clone();
        let blobs = extract(&mut spans, &PayloadPolicy::default(), &|_| false).unwrap();
        assert_eq!(
            blobs.len(),
            2,
            "each distinct value once: the prompt and the big string"
        );
        assert!(as_ref_value(&spans[0].attributes.last().unwrap().value).is_some());
        assert!(as_ref_value(&spans[3].resource.attributes[0].value).is_some());
        assert!(
            Arc::ptr_eq(&spans[0].resource, &spans[5].resource),
            "the rewritten resource is shared"
        );
        // Known payloads are referenced, not stored again.
        let mut again = original.clone();
        let known: Vec<PayloadRef> = blobs.iter().map(|b| b.id).collect();
        assert!(
            extract(&mut again, &PayloadPolicy::default(), &|id| known.contains(id))
                .unwrap()
                .is_empty()
        );
        let store: FastMap<PayloadRef, Vec<u8>> = blobs.iter().map(|b| (b.id, b.decompress("test").unwrap())).collect();
        for s in spans.iter_mut() {
            inline(s, &|id| Ok(store.get(id).cloned())).unwrap();
        }
        assert_eq!(spans, original);
    }
}
