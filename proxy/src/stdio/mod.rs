//! The proxy's byte streams: reading lines with a length limit, and writing lines through a
//! queue whose size the relay loop watches, so that a peer that stops reading stops the proxy
//! from reading the other side instead of growing it.
//!
//! One file per concept: the reader of a side's lines and pieces (`reader`, with its reads past
//! the runtime in `reader/by_descriptor.rs`), the queue toward a side (`outbound`), the proxy's own
//! stdin and stdout (`standard`), and what the reader and the queue ask of a stream's
//! descriptor (`descriptor`). The tests of a streamed line moved by `splice`, which take all of
//! them together, are `tests`.

mod descriptor;
mod outbound;
mod reader;
mod standard;
#[cfg(test)]
mod tests;

pub use descriptor::{Descriptor, ReadDescriptor};
pub use outbound::{Outbound, STREAM_HIGH_WATER};
pub use reader::{Line, MAX_LINE_BYTES, Piece, PieceReader};
pub use standard::{Stdio, stdin, stdout};

// Alias kept until the loop's files are renamed at merge.
pub use PieceReader as LineReader;
