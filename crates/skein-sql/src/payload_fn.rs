//! The SQL function `payload(text)`: an attribute value held in the payload
//! store reads, in the maps, as its reference (`{"$payload": "blake3:…",
//! "bytes": N, "preview": …}`), so that scans stay small; `payload(v)`
//! gives its full text instead (bytes as base64, as map values print
//! bytes). Any other text comes back as it is; a reference whose payload is
//! not stored (collected since) is NULL.
//!
//! Each reference is one read of the payload store, on the SQL runtime's
//! threads: meant for the rows a query keeps, e.g.
//! `SELECT payload(attributes['gen_ai.input.messages']) FROM spans WHERE … LIMIT 10`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use skein_engine::payload::{BINARY_TYPE, REF_KEY, TYPE_KEY};
use skein_engine::{Engine, PayloadRef};

pub struct PayloadFn {
    engine: Arc<Engine>,
    signature: Signature,
}

impl PayloadFn {
    pub fn new(engine: Arc<Engine>) -> PayloadFn {
        PayloadFn {
            engine,
            signature: Signature::string(1, Volatility::Stable),
        }
    }

    /// The full text of `v` if it is a payload reference (`None`: its
    /// payload is gone); `v` itself otherwise.
    fn resolve(&self, v: &str) -> Result<Option<String>> {
        let Some((id, binary)) = reference(v) else {
            return Ok(Some(v.to_string()));
        };
        let bytes = self
            .engine
            .payload(&id)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(bytes.map(|b| {
            if binary {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(b)
            } else {
                String::from_utf8_lossy(&b).into_owned()
            }
        }))
    }
}

/// The payload `v` refers to, and whether it is binary, if `v` is the
/// JSON text of a reference.
fn reference(v: &str) -> Option<(PayloadRef, bool)> {
    if !v.starts_with('{') || !v.contains(REF_KEY) {
        return None;
    }
    let serde_json::Value::Object(m) = serde_json::from_str(v).ok()? else {
        return None;
    };
    let id = PayloadRef::parse(m.get(REF_KEY)?.as_str()?).ok()?;
    let binary = m.get(TYPE_KEY).and_then(|t| t.as_str()) == Some(BINARY_TYPE);
    Some((id, binary))
}

impl std::fmt::Debug for PayloadFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("payload()")
    }
}

/// One engine's function equals only itself (DataFusion compares UDFs).
impl PartialEq for PayloadFn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.engine, &other.engine)
    }
}

impl Eq for PayloadFn {}

impl Hash for PayloadFn {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.engine).hash(state);
    }
}

impl ScalarUDFImpl for PayloadFn {
    fn name(&self) -> &str {
        "payload"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return Err(DataFusionError::Plan("payload() takes one argument".into()));
        };
        let input: ArrayRef = cast(&arg.to_array(args.number_rows)?, &DataType::Utf8)?;
        let strings = input
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .ok_or_else(|| DataFusionError::Internal("payload(): not text after a cast to text".into()))?;
        let mut out = StringBuilder::with_capacity(strings.len(), strings.value_data().len());
        for i in 0..strings.len() {
            if strings.is_null(i) {
                out.append_null();
            } else {
                out.append_option(self.resolve(strings.value(i))?);
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_recognised_and_other_text_is_not() {
        let id = PayloadRef::of(b"hello");
        let text = format!(r#"{{"$payload":"{id}","bytes":5,"preview":"hello"}}"#);
        assert_eq!(reference(&text), Some((id, false)));
        let bin = format!(r#"{{"$payload":"{id}","bytes":5,"preview":"","type":"bytes"}}"#);
        assert_eq!(reference(&bin), Some((id, true)));
        for other in [
            "hello",
            "{}",
            r#"{"$payload":"nope"}"#,
            r#"{"$payload": 3}"#,
            "{not json $payload",
        ] {
            assert_eq!(reference(other), None, "{other}");
        }
    }
}
