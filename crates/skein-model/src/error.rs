//! The one error type of the model: a message naming what is wrong.

use std::fmt;

/// An invalid input, described so that the sender can fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    message: String,
}

impl ModelError {
    pub fn new(message: impl Into<String>) -> Self {
        ModelError {
            message: message.into(),
        }
    }

    /// Prefixes the message with where the problem is, e.g. `span 3`.
    pub fn at(self, place: impl fmt::Display) -> Self {
        ModelError {
            message: format!("{place}: {}", self.message),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ModelError {}
