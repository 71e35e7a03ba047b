//! Every bound the daemon keeps on what its peers make it hold or wait for, in one place.
//!
//! Together they cap what any set of peers, even of the daemon's own user, can make it hold:
//! at most [`MAX_CONNECTIONS`] connections; for each, a read buffer of [`READ_BUFFER_FREE`]
//! bytes plus its share of [`INPUT_BUDGET`] (one budget for every connection's unfinished
//! lines), and one outgoing line at a time; pushes are coalesced to the newest state of each
//! workspace and serialised once for every connection that sends them. Time bounds the rest:
//! nothing a peer starts (a line, a hello, reading a line the daemon writes) may take longer
//! than the timeouts below, and shutdown never waits on a peer longer than
//! [`SHUTDOWN_GRACE`]. README.md, docs/PROTOCOL.md and docs/RELIABILITY.md state these numbers;
//! change them together.
//!
//! This module only names numbers; the modules that enforce them say how.

use std::time::Duration;

/// Upper bound on concurrent connections. Each MCP session holds one, so this is sized for
/// thousands of sessions; past it, new connections wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 16_384;

/// The most connections one user other than the daemon's own and root may hold (a member of a
/// shared service); past it, a new one is told so (`-32009`) and closed.
pub const CONNECTIONS_PER_UID: usize = 2_048;

/// How many of [`MAX_CONNECTIONS`] only the daemon's own user and root may take: other users
/// together stop short of them, so the owner can always connect.
pub const CONNECTIONS_RESERVED: usize = 1_024;

/// How many refused connections are told why at once; past it, a refused connection is closed
/// without a word. A refusal holds no connection slot, so a peer flooding the socket with
/// connections it will be refused cannot use up the reserve either.
pub const REFUSALS_AT_ONCE: usize = 64;

/// How long a greeted connection that has registered no session and subscribed to nothing may
/// stay idle (no request) before it is closed: a client that wants pushes says so; any other
/// one-off client (rootsctl add, list, status) is done in milliseconds. It is told why
/// (`-32009`, `"id": null`) and may reconnect. `server::run_tuned` takes another value ([`Tuning`]), for tests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a new connection may take to say hello before it is closed.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a peer may take to finish a line it has started sending. Clients write a request
/// in one go, so even a 1 MiB line arrives in milliseconds; a peer that stops halfway is gone
/// or hostile, and must not hold its buffer.
pub const PARTIAL_LINE_TIMEOUT: Duration = Duration::from_secs(10);

/// Initial read buffer per connection, in bytes. Most connections are idle sessions that
/// receive a few lines an hour, so the buffer starts small and grows only for the lines that
/// need it, and shrinks back after them.
pub const READ_BUFFER_START: usize = 512;

/// How much of a connection's read buffer is its own. Beyond this, up to the longest line
/// (`rootsd_proto::wire::MAX_LINE_BYTES`), buffer is charged to [`INPUT_BUDGET`]. Every
/// request rootsctl and the proxy send in ordinary use fits.
pub const READ_BUFFER_FREE: usize = 4 * 1024;

/// The budget, shared by all connections, for read buffer beyond [`READ_BUFFER_FREE`]: what
/// unfinished long lines may hold at once. A connection whose line would exceed it is told so
/// and closed.
pub const INPUT_BUDGET: usize = 64 * 1024 * 1024;

/// How long the daemon waits for a peer to take one line it writes (a response or a push).
/// A peer that stops reading altogether is disconnected after this; pushes are coalesced, so a
/// peer that merely reads slowly is never this far behind.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// After a shutdown starts, how long a connection may go on writing a line its peer does not
/// take. Requests already being served finish; then every connection closes.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How long the daemon spends telling a refused peer why before it closes the connection.
pub const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// How many changes the history keeps (`rootsctl log`); past it the oldest entry is dropped.
/// Each entry is a few hundred bytes for a typical change, so the history is about 300 KB, held
/// in memory, in the database and in the journal's snapshot.
pub const HISTORY_ENTRIES: usize = 1000;

/// How many bytes of roots (URI and name) one history entry lists; the roots of a larger change
/// beyond this are counted, not listed. Bounds an entry at about 16 KiB whatever the change, so
/// the history stays under about 16 MiB even if every change is huge.
pub const HISTORY_ENTRY_ROOT_BYTES: usize = 16 * 1024;

/// How many bytes of entries (as JSON) one `log` response carries, beyond its first entry; with
/// an entry at most about 100 KiB even if JSON escapes every character, a response stays well
/// inside the line limit (`rootsd_proto::wire::MAX_LINE_BYTES`). The client asks for the next
/// page.
pub const LOG_PAGE_BYTES: usize = 256 * 1024;

/// How many bytes of each text an entry records about who made a change (the client's claimed
/// name, the user and process names, a session's label); longer ones are cut at a character
/// boundary. The client's name comes from the client itself and could otherwise be as long as
/// a line.
pub const HISTORY_TEXT_BYTES: usize = 256;

/// After a start, how long `wait` also waits for the sessions the previous run had to come back
/// (`crate::reconnect`). A proxy retries its connection with a backoff of at most 2 s, so one
/// whose daemon restarted is back within about that; the rest of the window is leeway for a
/// loaded machine. A session not back by then is reported as not reconnected.
pub const RECONNECT_WINDOW: Duration = Duration::from_secs(5);

/// How long the record of live sessions waits after a change of the session table before it is
/// written: a restart brings every proxy back within a moment, and they cost one write together.
pub const SESSION_RECORD_DEBOUNCE: Duration = Duration::from_millis(200);

/// The largest record of live sessions read at start, in bytes: 16,384 sessions of a few hundred
/// bytes each (labels are cut to [`HISTORY_TEXT_BYTES`]). A larger file is not read.
pub const SESSION_RECORD_BYTES: u64 = 8 * 1024 * 1024;

/// How many bytes of each text a session's report carries for display (its label, its server's
/// name and version) the daemon keeps; longer ones are cut at a character boundary. They come
/// from the proxy's command line and from an MCP server nobody vets, and are only ever shown,
/// so cutting loses nothing a rule depends on, where refusing would leave the session's report
/// unapplied (`session.update` is a notification nobody answers) and the daemon's view of the
/// session stale.
pub const SESSION_TEXT_BYTES: usize = 256;

/// How many bytes of a session's negotiated MCP protocol version the daemon keeps (real ones
/// are dates, `2025-11-25`); cut like [`SESSION_TEXT_BYTES`].
pub const SESSION_PROTOCOL_VERSION_BYTES: usize = 64;

/// How many bytes of withheld roots (URI and name, `rootsctl proxy --map`) one session's report
/// lists; the rest are counted, not listed, as the proxy itself does past 16 of them.
pub const SESSION_WITHHELD_BYTES: usize = 4 * 1024;

/// The most live sessions the daemon holds: one per connection at most ([`MAX_CONNECTIONS`]).
/// With every field at its bound a session's record is under 6 KiB, so the table stays under
/// 96 MiB; past it `session.register` is refused (`-32010`) naming this limit.
pub const MAX_SESSIONS: usize = MAX_CONNECTIONS;

/// The most sessions one user other than the daemon's own and root may hold, so that a member
/// of a shared service cannot take the table.
pub const SESSIONS_PER_UID: usize = 2_048;

/// How many of [`MAX_SESSIONS`] only the daemon's own user and root may take: other users
/// together stop short of them, so the owner can always attach a session.
pub const SESSIONS_RESERVED: usize = 1_024;

/// How many bytes of sessions (as JSON) one `sessions.list` answer carries beyond its first; a
/// session is at most about 36 KiB of JSON even if every byte of its texts is escaped, so an
/// answer stays well inside the line limit (`rootsd_proto::wire::MAX_LINE_BYTES`, 1 MiB) however
/// many sessions there are. The client asks for the next page.
pub const SESSIONS_PAGE_BYTES: usize = 256 * 1024;

/// The most roots one workspace holds, whoever adds them (by hand or a session's
/// publication). A change that would take a workspace past it is refused (`-32010`) naming the
/// limit; one that leaves a workspace no larger is always taken, so a store from before the limit
/// keeps working.
pub const MAX_WORKSPACE_ROOTS: usize = 4_096;

/// The most bytes a workspace's list may take as `roots.list` answers it: the JSON of every root
/// with its URI, name and origins (each publishing session's label included), exactly as
/// serde_json writes it. Refused past it like [`MAX_WORKSPACE_ROOTS`].
///
/// The arithmetic that makes every line carrying a whole list fit: a `roots.list` answer is this
/// list plus its envelope (the workspace's name, at most 64 bytes, the revision, the echoed id:
/// well under 1 KiB for any client of ours), so at most 513 KiB; a `roots.changed` push carries
/// the same roots without their origins, so less; both are under
/// `rootsd_proto::wire::MAX_LINE_BYTES` (1 MiB), the line both sides promise to take, with room
/// to spare, and rootsctl's reader (used by `list`, `watch` and the proxy's daemon link) takes
/// 16 times that. A history entry lists at most [`HISTORY_ENTRY_ROOT_BYTES`] of a change's roots
/// and a journal record holds one workspace, so neither grows past these either.
pub const MAX_WORKSPACE_BYTES: usize = 512 * 1024;

/// The most workspaces that hold roots. A change giving roots to a new workspace past it is
/// refused like [`MAX_WORKSPACE_ROOTS`].
pub const MAX_WORKSPACES: usize = 256;

/// The most bytes the lists of every workspace may take together, measured as
/// [`MAX_WORKSPACE_BYTES`] is. The daemon holds its roots several times over (the committed and
/// the pending state, each workspace's published snapshot and its line, the journal's snapshot
/// while it compacts, sled's cache), so this is what bounds the memory roots take: 256
/// workspaces at their own bound (128 MiB of lists) took 1,072 MiB of RSS
/// (`scripts/reliability/publications.py --fill`, before this bound). Refused like the others.
pub const MAX_TOTAL_BYTES: usize = 16 * 1024 * 1024;

/// The longest a `wait` request may ask to wait (`timeout_ms` is cut to it): a day, so that a
/// client's number, however large, never overflows the deadline, while a waiter holds nothing
/// but its connection.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// The most a refused peer's bytes are read, after its one line of refusal and within
/// [`REFUSAL_TIMEOUT`], so that closing the connection then ends it cleanly (an unread byte would
/// make the close a reset, which may drop the line before the peer reads it).
pub const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// The waits of `server::run` that a test may shorten rather than wait on the wall clock for;
/// the daemon itself always runs with [`Tuning::default`], the limits above.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// [`IDLE_TIMEOUT`] unless a test says otherwise.
    pub idle_timeout: Duration,
    /// [`PARTIAL_LINE_TIMEOUT`] unless a test says otherwise.
    pub partial_line_timeout: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            idle_timeout: IDLE_TIMEOUT,
            partial_line_timeout: PARTIAL_LINE_TIMEOUT,
        }
    }
}
