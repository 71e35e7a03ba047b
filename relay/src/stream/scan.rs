//! A line read as it arrives, a piece at a time, for what the relay needs of it once it ends:
//! whether it is one well-formed object (by the same lenient rules as [`super::super::json`]:
//! brackets counted, strings skipped, only the top level's shape checked), and its top-level
//! `id`, `method`, `result` and `error`. It holds a bounded amount whatever the line's length:
//! the state of the scan, and the few member values it keeps (each at most [`VALUE_KEPT`]).

use crate::json;

/// The longest key that is read for its meaning: `method` spelt entirely in `\u` escapes is 36
/// bytes; a longer key names nothing the relay reads.
const KEY_KEPT: usize = 256;

/// The longest `id` or `method` value kept. Ids and method names are short; a longer one is
/// noted as being there, not kept.
pub(super) const VALUE_KEPT: usize = 64 << 10;

/// Where the scan stands between two bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the opening brace.
    Start,
    /// After `{`: a key or `}`.
    First,
    /// Inside a key's string.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:`: a value.
    Value,
    /// Inside a top-level string value.
    Text,
    /// Inside a container value, `depth` brackets deep.
    Nested { depth: usize, in_string: bool },
    /// Inside a number or literal: it runs to whitespace or `,`, `}`, `]`.
    Scalar,
    /// After a value: `,` or `}`.
    Next,
    /// After `,`: a key.
    Key0,
    /// After the closing brace: whitespace only.
    Closed,
    /// Not one well-formed object; nothing more is learnt.
    Invalid,
}

/// A member value kept for the relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kept {
    Bytes(Vec<u8>),
    /// Longer than [`VALUE_KEPT`].
    TooLong,
}

/// Which top-level member the value being read belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Id,
    Method,
    Other,
}

/// What the scan learnt of a whole line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Seen {
    /// The last `id` member's value.
    pub id: Option<Kept>,
    /// The last `method` member's value.
    pub method: Option<Kept>,
    pub result: bool,
    pub error: bool,
}

/// The scan of one line.
pub(super) struct Scan {
    state: State,
    /// The previous byte was a backslash inside a string.
    escaped: bool,
    /// The key being read, quotes included, while it fits [`KEY_KEPT`].
    key: Vec<u8>,
    key_too_long: bool,
    role: Role,
    /// The value being read, for an `id` or `method`.
    value: Vec<u8>,
    value_too_long: bool,
    seen: Seen,
}

impl Scan {
    pub fn new() -> Self {
        Self {
            state: State::Start,
            escaped: false,
            key: Vec::new(),
            key_too_long: false,
            role: Role::Other,
            value: Vec::new(),
            value_too_long: false,
            seen: Seen::default(),
        }
    }

    /// Reads the next bytes of the line.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            i = self.step(bytes, i);
        }
    }

    /// What the line held, if it was one well-formed object.
    pub fn finish(self) -> Option<Seen> {
        (self.state == State::Closed).then_some(self.seen)
    }

    /// Reads from `bytes[i]` on, as far as one state goes; returns where the next read starts.
    fn step(&mut self, bytes: &[u8], i: usize) -> usize {
        let b = bytes[i];
        match self.state {
            State::Start
            | State::First
            | State::Colon
            | State::Value
            | State::Next
            | State::Key0
            | State::Closed
                if json::is_ws(b) =>
            {
                i + 1
            }
            State::Start => {
                self.state = if b == b'{' {
                    State::First
                } else {
                    State::Invalid
                };
                i + 1
            }
            State::First | State::Key0 => {
                self.state = match b {
                    b'"' => {
                        self.key.clear();
                        self.key.push(b);
                        self.key_too_long = false;
                        State::Key
                    }
                    b'}' if self.state == State::First => State::Closed,
                    _ => State::Invalid,
                };
                i + 1
            }
            State::Key => {
                let (end, closed) = self.string_run(bytes, i);
                if !self.key_too_long {
                    if self.key.len() + (end - i) <= KEY_KEPT {
                        self.key.extend_from_slice(&bytes[i..end]);
                    } else {
                        self.key_too_long = true;
                    }
                }
                if closed {
                    self.role = self.key_role();
                    self.state = State::Colon;
                }
                end
            }
            State::Colon => {
                self.state = if b == b':' {
                    State::Value
                } else {
                    State::Invalid
                };
                i + 1
            }
            State::Value => {
                self.value.clear();
                self.value_too_long = false;
                self.state = match b {
                    b'"' => State::Text,
                    b'{' | b'[' => State::Nested {
                        depth: 1,
                        in_string: false,
                    },
                    b',' | b':' | b'}' | b']' => return self.invalid(),
                    _ => State::Scalar,
                };
                self.keep(&bytes[i..i + 1]);
                i + 1
            }
            State::Text => {
                let (end, closed) = self.string_run(bytes, i);
                self.keep(&bytes[i..end]);
                if closed {
                    self.value_done();
                }
                end
            }
            State::Nested { depth, in_string } => self.nested(bytes, i, depth, in_string),
            State::Scalar => {
                if json::is_ws(b) || matches!(b, b',' | b'}' | b']') {
                    // The delimiter belongs to what follows the value.
                    self.value_done();
                    return i;
                }
                let end = bytes[i..]
                    .iter()
                    .position(|&c| json::is_ws(c) || matches!(c, b',' | b'}' | b']'))
                    .map_or(bytes.len(), |at| i + at);
                self.keep(&bytes[i..end]);
                end
            }
            State::Next => {
                self.state = match b {
                    b',' => State::Key0,
                    b'}' => State::Closed,
                    _ => State::Invalid,
                };
                i + 1
            }
            State::Closed => self.invalid(),
            State::Invalid => bytes.len(),
        }
    }

    fn invalid(&mut self) -> usize {
        self.state = State::Invalid;
        // Nothing more is read: the caller's loop ends on a position past any chunk.
        usize::MAX
    }

    /// Reads string bytes from `i`: up to and including the closing quote (`true`), or to the
    /// end of `bytes` (`false`). Escapes are skipped as `json::string_end` skips them, the byte
    /// after a backslash whatever it is, across pieces too.
    ///
    /// A streamed line is mostly one long string (a tool's text), so this is the scan's hot
    /// loop: it searches for quotes alone, which runs at about twice the speed of searching for
    /// quotes and backslashes together, and settles whether a quote is escaped by the run of
    /// backslashes before it (an odd run escapes it, as each backslash escapes the next byte).
    fn string_run(&mut self, bytes: &[u8], mut i: usize) -> (usize, bool) {
        if self.escaped {
            self.escaped = false;
            i += 1;
        }
        // From `i` on, no byte is escaped by one before `i`.
        while i < bytes.len() {
            let Some(at) = memchr::memchr(b'"', &bytes[i..]) else {
                self.escaped = !backslashes_before(bytes, i, bytes.len()).is_multiple_of(2);
                return (bytes.len(), false);
            };
            let quote = i + at;
            if backslashes_before(bytes, i, quote).is_multiple_of(2) {
                return (quote + 1, true);
            }
            i = quote + 1;
        }
        (bytes.len().min(i), false)
    }

    /// Inside a container: brackets of either kind counted outside strings, as
    /// `json::value_end` counts them.
    fn nested(
        &mut self,
        bytes: &[u8],
        mut i: usize,
        mut depth: usize,
        mut in_string: bool,
    ) -> usize {
        let start = i;
        while i < bytes.len() {
            if in_string {
                let (end, closed) = self.string_run(bytes, i);
                i = end;
                in_string = !closed;
                continue;
            }
            match bytes[i] {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.keep(&bytes[start..i + 1]);
                        self.value_done();
                        return i + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.keep(&bytes[start..]);
        self.state = State::Nested { depth, in_string };
        bytes.len()
    }

    /// Keeps `bytes` of the value being read, if it is one the relay reads.
    fn keep(&mut self, bytes: &[u8]) {
        if self.role == Role::Other || self.value_too_long {
            return;
        }
        if self.value.len() + bytes.len() > VALUE_KEPT {
            self.value_too_long = true;
            self.value = Vec::new();
        } else {
            self.value.extend_from_slice(bytes);
        }
    }

    /// The value of the member being read is complete.
    fn value_done(&mut self) {
        self.state = State::Next;
        let mut kept = || {
            if self.value_too_long {
                Kept::TooLong
            } else {
                Kept::Bytes(std::mem::take(&mut self.value))
            }
        };
        match self.role {
            Role::Id => self.seen.id = Some(kept()),
            Role::Method => self.seen.method = Some(kept()),
            Role::Other => {}
        }
        self.role = Role::Other;
    }

    /// What the key just read names. `result` and `error` are noted at once: their values are
    /// never needed, only that they are there.
    fn key_role(&mut self) -> Role {
        if self.key_too_long {
            return Role::Other;
        }
        match json::decode_string(&self.key).as_str() {
            "id" => Role::Id,
            "method" => Role::Method,
            "result" => {
                self.seen.result = true;
                Role::Other
            }
            "error" => {
                self.seen.error = true;
                Role::Other
            }
            _ => Role::Other,
        }
    }
}

/// How many backslashes run back from just before `end`, no further back than `from`.
fn backslashes_before(bytes: &[u8], from: usize, end: usize) -> usize {
    bytes[from..end]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
}
