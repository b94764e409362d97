//! A store's object sink as a `std::io::Write`, for the Parquet writers of
//! parts and their calls tables.

use crate::storage::ObjectSink;

pub(super) struct SinkWriter(pub(super) Box<dyn ObjectSink>);

impl std::io::Write for SinkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
