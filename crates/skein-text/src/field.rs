//! The searchable fields of a record and sets of them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which text of a record a value came from; a query can be restricted to one
/// (`body:timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    /// A log body.
    Body,
    /// A span or event name, an exception type.
    Name,
    /// A status message, an exception message or stack trace.
    Message,
    /// Payload text: prompts, completions, tool calls and results.
    Payload,
}

impl Field {
    /// Every field, in a fixed order (the order of their bits in [`FieldSet`]).
    pub const ALL: [Field; 4] = [Field::Body, Field::Name, Field::Message, Field::Payload];

    /// The name used in queries (`body:`) and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Field::Body => "body",
            Field::Name => "name",
            Field::Message => "message",
            Field::Payload => "payload",
        }
    }

    /// The field a query prefix names, case-insensitively.
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of fields a query clause applies to: all of them unless restricted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldSet(u8);

impl FieldSet {
    /// Every field: what a clause without a `field:` prefix searches.
    pub const ALL: FieldSet = FieldSet(0b1111);

    /// Just one field.
    pub fn one(field: Field) -> FieldSet {
        FieldSet(1 << field.index())
    }

    pub(crate) fn bits(self) -> u8 {
        self.0
    }

    pub(crate) fn from_bits(bits: u8) -> FieldSet {
        FieldSet(bits & FieldSet::ALL.0)
    }

    /// Whether `field` is in the set.
    pub fn contains(self, field: Field) -> bool {
        self.0 & (1 << field.index()) != 0
    }

    /// The fields in the set, in [`Field::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Field> {
        Field::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

/// A record's searchable text: `(field, value)` pairs. A field may appear
/// several times (several exception messages on one span).
pub type Doc<'a> = Vec<(Field, &'a str)>;
