//! The 2026-07-28 era: no handshake, no server-to-client requests. Every request declares the
//! client's capabilities in `_meta`, and a server that needs roots answers a `tools/call`,
//! `prompts/get` or `resources/read` with an `input_required` result; the client retries the
//! request under a new id with the answers (SEP-2322, "MRTR").
//!
//! The proxy declares `roots: {}` on the host's requests of those three methods (the only ones it
//! answers roots for) and carries each through its rounds: a result asking only for roots is
//! answered and retried here, unseen by the host; a result that also asks for elicitation or
//! sampling goes to the host without the roots part, which the proxy adds to the host's retry.
//! Without a list from the daemon it waits, and then fails the request: it never tells a server
//! that there are no roots when it does not know. With `--host-roots merge|publish`, a request
//! whose `_meta` declares the host's own `roots` capability has its roots rounds go to the host,
//! `roots/list` entries and all; the host's retry carries its roots, which the proxy takes
//! ([`host_roots`]) before it puts its own answer in their place.
//!
//! The proxy also keeps the ids apart: its own retries and probes never reuse an id the host has
//! in flight, and a host request whose id one of the proxy's requests holds is relayed under
//! another one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rootsd_proto::host_roots::HostRootsMode;
use rootsd_proto::session::Era;
use serde_json::Value;

use super::host_roots;
use super::json::{self, Editor};
use super::message::{self, Msg};
use super::{Availability, Fate, Output, Shared};

/// `_meta` key carrying the protocol version of a 2026-07-28 request.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client capabilities of a 2026-07-28 request.
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key a 2026-07-28 server puts its identity under.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Methods whose results may be `input_required` (SEP-2322).
const MRTR_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
/// How many times the proxy retries one request on its own before giving up, as the SDKs do.
pub const MAX_MRTR_ROUNDS: u32 = 10;
/// Prefix of the ids of the proxy's own requests.
const PROXY_ID_PREFIX: &str = "rootsd-";
/// How long the roots part of a mixed `input_required` result is kept for the host's retry.
const HELD_FOR: Duration = Duration::from_secs(600);
/// How many such parts are kept at once; the oldest goes first.
const MAX_HELD: usize = 1024;
/// How long a request the host cancelled is remembered, to drop the server's late answer.
const CANCELLED_FOR: Duration = Duration::from_secs(60);
/// How many requests the proxy follows through rounds at once; past that, the oldest fails.
const MAX_EXCHANGES: usize = 4096;

/// One host request the proxy follows: through `input_required` rounds, or because it relays it
/// under another id.
struct Exchange {
    /// The id the host knows the request by (raw JSON).
    host_id: Vec<u8>,
    /// The request as last sent to the server.
    request: Vec<u8>,
    rounds: u32,
    /// Whether `input_required` results of this request are the proxy's to look at.
    mrtr: bool,
    /// The host's request declared its own `roots` capability: with `--host-roots merge` or
    /// `publish` its roots rounds go to the host.
    host_roots: bool,
    /// When the host cancelled it; its late answer is dropped.
    cancelled: Option<Instant>,
    started: Instant,
}

/// The roots part of an `input_required` result that went to the host, kept for its retry.
struct Held {
    keys: Vec<String>,
    /// The host was asked for its own roots under `keys` too, and answers them in its retry.
    asked_host: bool,
    expires: Instant,
}

/// A server's roots-only `input_required` result, waiting for the daemon's first list.
struct Parked {
    exchange: Exchange,
    response: Vec<u8>,
    deadline: Instant,
}

/// A host's retry that needs the roots part added, waiting for the daemon's first list.
struct ParkedRetry {
    host_id: Vec<u8>,
    request: Vec<u8>,
    keys: Vec<String>,
    host_roots: bool,
    deadline: Instant,
}

/// The 2026-07-28 era's state.
#[derive(Default)]
pub(super) struct Stateless {
    /// Followed requests, keyed by the id the server knows them by.
    exchanges: HashMap<Vec<u8>, Exchange>,
    /// Keyed by `requestState`.
    held: HashMap<String, Held>,
    parked: Vec<Parked>,
    parked_retries: Vec<ParkedRetry>,
    /// The key of the proxy's own `server/discover`, while it is in flight.
    probe: Option<Vec<u8>>,
    probed: bool,
    /// The `_meta` of the host's last 2026-07-28 request, for the proxy's own requests.
    last_meta: Option<Vec<u8>>,
    next_id: u64,
}

/// A 2026-07-28 request carries its protocol version in `_meta`.
pub(super) fn is_modern(msg: &Msg<'_>) -> bool {
    msg.at(&["params", "_meta", META_PROTOCOL_VERSION])
        .is_some()
}

impl Stateless {
    /// A 2026-07-28 request from the host: note the version, declare roots where the proxy
    /// answers them, and follow it if its result may ask for them.
    pub(super) fn host_request(
        &mut self,
        shared: &mut Shared,
        msg: &Msg<'_>,
        method: &str,
        id: &[u8],
    ) -> Fate {
        if let Some(version) = msg.string_at(&["params", "_meta", META_PROTOCOL_VERSION]) {
            shared.state.protocol_version = Some(version);
        }
        if let Some(meta) = msg.at(&["params", "_meta"]) {
            self.last_meta = Some(meta.of(msg.text).to_vec());
        }
        if !MRTR_METHODS.contains(&method) {
            return self.avoid_collision(shared, msg, id);
        }
        let caps = ["params", "_meta", META_CLIENT_CAPABILITIES];
        let host_roots = msg.at(&[caps[0], caps[1], caps[2], "roots"]).is_some();
        let mut editor = Editor::new(msg.text);
        if editor
            .ensure(msg.span(), &caps, "roots", b"{}", true)
            .is_none()
        {
            // `params` or its `_meta` is not an object: nothing the proxy can add to.
            return Fate::Keep;
        }
        let server_id = self.server_id_for(shared, id);
        if server_id != id {
            editor.set(msg.span(), "id", &server_id);
        }
        let held = msg
            .string_at(&["params", "requestState"])
            .and_then(|state| self.held.remove(&state));
        let request = editor.finish();
        let Some(held) = held else {
            self.start(shared, id, &server_id, request, true, host_roots);
            return Fate::Replace(self.last_sent(&server_id));
        };
        if held.asked_host {
            learn_from_retry(shared, msg, &held.keys);
        }
        match shared.roots.availability() {
            Availability::Ready => {
                let request = add_roots_answers(shared, &request, &held.keys);
                self.start(shared, id, &server_id, request, true, host_roots);
                Fate::Replace(self.last_sent(&server_id))
            }
            Availability::Awaited => {
                self.parked_retries.push(ParkedRetry {
                    host_id: id.to_vec(),
                    request,
                    keys: held.keys,
                    host_roots,
                    deadline: shared.now + shared.config.patience,
                });
                Fate::Drop
            }
            Availability::Unavailable => {
                shared.emit(Output::ToHost(no_roots(id)));
                Fate::Drop
            }
        }
    }

    /// A host request the proxy does not otherwise touch: relayed as it is, unless one of the
    /// proxy's own requests in flight holds its id.
    pub(super) fn avoid_collision(
        &mut self,
        shared: &mut Shared,
        msg: &Msg<'_>,
        id: &[u8],
    ) -> Fate {
        if !self.id_taken(id) {
            return Fate::Keep;
        }
        let server_id = self.proxy_id(shared, "relay");
        let mut editor = Editor::new(msg.text);
        editor.set(msg.span(), "id", &server_id);
        self.start(shared, id, &server_id, editor.finish(), false, false);
        Fate::Replace(self.last_sent(&server_id))
    }

    /// The host cancels a request: the cancellation follows the request to the id the server
    /// knows it by, and the proxy stops carrying it (no retry, no late answer, state freed).
    pub(super) fn host_cancel(&mut self, shared: &Shared, msg: &Msg<'_>) -> Fate {
        let Some(span) = msg.at(&["params", "requestId"]) else {
            return Fate::Keep;
        };
        let key = json::id_key(span.of(msg.text));
        let parked_before = self.parked.len() + self.parked_retries.len();
        self.parked
            .retain(|p| json::id_key(&p.exchange.host_id) != key);
        self.parked_retries
            .retain(|p| json::id_key(&p.host_id) != key);
        if self.parked.len() + self.parked_retries.len() < parked_before {
            // The server is not working on it: the request is waiting here, or it already
            // answered with input_required. Nothing to tell it.
            return Fate::Drop;
        }
        let Some((server_key, exchange)) = self
            .exchanges
            .iter_mut()
            .find(|(_, e)| e.cancelled.is_none() && json::id_key(&e.host_id) == key)
        else {
            return Fate::Keep;
        };
        exchange.cancelled = Some(shared.now);
        if *server_key == key {
            return Fate::Keep;
        }
        let server_id = id_of(&exchange.request);
        let mut editor = Editor::new(msg.text);
        let Some(params) = msg.get("params") else {
            return Fate::Keep;
        };
        editor.set(params, "requestId", &server_id);
        Fate::Replace(editor.finish())
    }

    /// A response from the server. Notes the era and the server's identity, then finishes the
    /// round of a request the proxy follows.
    pub(super) fn response(
        &mut self,
        shared: &mut Shared,
        msg: &Msg<'_>,
        id: &[u8],
        modern: bool,
        handshake_negotiated: bool,
    ) -> Fate {
        let key = json::id_key_ref(id);
        if modern && msg.is_success() && !handshake_negotiated {
            // The server accepted a 2026-07-28 request: that is what this session speaks.
            shared.state.era = Era::Stateless;
            shared.state.list_changed = false;
        }
        self.learn_server_info(shared, msg);
        if self.probe.as_deref() == Some(&key[..]) {
            self.probe = None;
            return Fate::Drop;
        }
        self.maybe_probe(shared);
        let Some(exchange) = self.exchanges.remove(&*key) else {
            return Fate::Keep;
        };
        // The host's id is free again once its request is answered (or given up), whatever id
        // it traveled under.
        let host_key = json::id_key(&exchange.host_id);
        if exchange.cancelled.is_some() {
            shared.in_flight.remove(&host_key);
            return Fate::Drop;
        }
        match self.finish(shared, exchange, msg) {
            Some(bytes) => {
                shared.in_flight.remove(&host_key);
                Fate::Replace(bytes)
            }
            None => Fate::Drop,
        }
    }

    /// Whether no response can be the proxy's to edit or drop: no request is followed (under
    /// another id, or through rounds) and no probe of the proxy's own is in flight.
    pub(super) fn idle(&self) -> bool {
        self.exchanges.is_empty() && self.probe.is_none()
    }

    /// The host id of a followed request known to the server as `key`, forgetting it: for a
    /// response that could not be relayed.
    pub(super) fn forget_exchange(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.exchanges.remove(key).map(|e| e.host_id)
    }

    /// The daemon's first list arrived: finish what waited for it.
    pub(super) fn resume_parked(&mut self, shared: &mut Shared) {
        for parked in std::mem::take(&mut self.parked) {
            let Some(msg) = Msg::read(&parked.response) else {
                continue;
            };
            if let Some(bytes) = self.finish(shared, parked.exchange, &msg) {
                shared.emit(Output::ToHost(bytes));
            }
        }
        for retry in std::mem::take(&mut self.parked_retries) {
            self.send_retry(shared, retry);
        }
    }

    /// Sends a host's retry that waited, with the roots answers added.
    fn send_retry(&mut self, shared: &mut Shared, retry: ParkedRetry) {
        let request = add_roots_answers(shared, &retry.request, &retry.keys);
        let server_id = id_of(&request);
        self.start(
            shared,
            &retry.host_id,
            &server_id,
            request,
            true,
            retry.host_roots,
        );
        let sent = self.last_sent(&server_id);
        shared.emit(Output::ToServer(sent));
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let parked = self.parked.iter().map(|p| p.deadline);
        let retries = self.parked_retries.iter().map(|p| p.deadline);
        let held = self.held.values().map(|h| h.expires);
        let cancelled = self
            .exchanges
            .values()
            .filter_map(|e| e.cancelled.map(|at| at + CANCELLED_FOR));
        parked.chain(retries).chain(held).chain(cancelled).min()
    }

    /// Finishes what waited too long with the list there is, or fails it if there is none, and
    /// forgets what can no longer complete.
    pub(super) fn tick(&mut self, shared: &mut Shared) {
        let now = shared.now;
        let (expired, parked): (Vec<Parked>, Vec<Parked>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|p| p.deadline <= now);
        self.parked = parked;
        let (expired_retries, retries): (Vec<ParkedRetry>, Vec<ParkedRetry>) =
            std::mem::take(&mut self.parked_retries)
                .into_iter()
                .partition(|p| p.deadline <= now);
        self.parked_retries = retries;
        if (!expired.is_empty() || !expired_retries.is_empty()) && shared.roots.snapshot.is_none() {
            shared.roots.given_up = true;
        }
        let listed = shared.roots.snapshot.is_some();
        for parked in expired {
            if !listed {
                shared.emit(Output::ToHost(no_roots(&parked.exchange.host_id)));
                continue;
            }
            // It waited for the host's roots in vain: the workspace's must do. (Should it still
            // be held, it parks again, and the hold ends within the host's patience.)
            if let Some(msg) = Msg::read(&parked.response)
                && let Some(bytes) = self.finish(shared, parked.exchange, &msg)
            {
                shared.emit(Output::ToHost(bytes));
            }
        }
        for retry in expired_retries {
            if listed {
                self.send_retry(shared, retry);
            } else {
                shared.emit(Output::ToHost(no_roots(&retry.host_id)));
            }
        }
        self.held.retain(|_, h| h.expires > now);
        self.exchanges
            .retain(|_, e| e.cancelled.is_none_or(|at| at + CANCELLED_FOR > now));
    }

    /// Answers `roots/list` entries of an `input_required` result and retries, or passes the
    /// result to the host under the host's id. Returns what the host should get now, if
    /// anything.
    fn finish(
        &mut self,
        shared: &mut Shared,
        mut exchange: Exchange,
        msg: &Msg<'_>,
    ) -> Option<Vec<u8>> {
        let mut editor = Editor::new(msg.text);
        if msg.id() != Some(&exchange.host_id[..]) {
            editor.set(msg.span(), "id", &exchange.host_id);
        }
        let restore_id = |editor: Editor<'_>| {
            Some(if editor.is_empty() {
                msg.text.to_vec()
            } else {
                editor.finish()
            })
        };
        if !exchange.mrtr
            || msg.string_at(&["result", "resultType"]).as_deref() != Some("input_required")
        {
            return restore_id(editor);
        }
        let Some(requests_span) = msg.at(&["result", "inputRequests"]) else {
            return restore_id(editor);
        };
        let requests = json::members(msg.text, requests_span).unwrap_or_default();
        let roots_keys: Vec<String> = requests
            .iter()
            .filter(|r| {
                json::at(msg.text, r.value, &["method"])
                    .and_then(|m| json::string(msg.text, m))
                    .as_deref()
                    == Some("roots/list")
            })
            .map(|r| r.key(msg.text).into_owned())
            .collect();
        if roots_keys.is_empty() {
            return restore_id(editor);
        }
        let state = msg.at(&["result", "requestState"]);
        let state_text = state.and_then(|s| json::string(msg.text, s));
        let wants_host = shared.config.host_roots != HostRootsMode::Replace;
        if wants_host && !exchange.host_roots {
            host_roots::undeclared(shared);
        }
        // The host is asked for its own roots in this round: it answers the roots/list entries
        // in its retry (which the requestState identifies), and the proxy completes them there.
        let ask_host = wants_host && exchange.host_roots && state_text.is_some();
        if ask_host || roots_keys.len() < requests.len() {
            // Elicitation or sampling is mixed in: only the host can answer those. Pass them on
            // and answer the roots part when the host retries with the same requestState.
            if let Some(state) = state_text {
                self.hold(shared, state, roots_keys.clone(), ask_host);
            }
            if ask_host {
                host_roots::asked_in_round(shared);
                return restore_id(editor);
            }
            for key in &roots_keys {
                editor.remove(requests_span, key);
            }
            return Some(editor.finish());
        }
        match shared.roots.availability() {
            Availability::Ready => {}
            Availability::Awaited => {
                // No list yet: answering now would tell the server there are no roots.
                let deadline = shared.now + shared.config.patience;
                self.parked.push(Parked {
                    exchange,
                    response: msg.text.to_vec(),
                    deadline,
                });
                return None;
            }
            Availability::Unavailable => return Some(no_roots(&exchange.host_id)),
        }
        if exchange.rounds >= MAX_MRTR_ROUNDS {
            return Some(message::internal_error(
                &exchange.host_id,
                &format!(
                    "the server still asked for roots after {MAX_MRTR_ROUNDS} rounds; rootsctl proxy gave up on this request"
                ),
            ));
        }
        let retry_id = self.proxy_id(shared, "retry");
        let mut retry = Editor::new(&exchange.request);
        let request_span = json::root(&exchange.request)?;
        retry.set(request_span, "id", &retry_id);
        let params = json::get(&exchange.request, request_span, "params")?;
        retry.set(
            params,
            "inputResponses",
            &roots_answers(shared, &roots_keys),
        );
        match state {
            // Echoed byte for byte: it is the server's, and opaque to everyone else.
            Some(state) => retry.set(params, "requestState", state.of(msg.text)),
            None => retry.remove(params, "requestState"),
        };
        let request = retry.finish();
        shared.note_fetch();
        shared.emit(Output::ToServer(request.clone()));
        exchange.request = request;
        exchange.rounds += 1;
        self.exchanges.insert(json::id_key(&retry_id), exchange);
        None
    }

    /// Remembers the roots part of a result that went to the host until it retries.
    fn hold(&mut self, shared: &Shared, state: String, keys: Vec<String>, asked_host: bool) {
        if self.held.len() >= MAX_HELD
            && let Some(oldest) = self
                .held
                .iter()
                .min_by_key(|(_, h)| h.expires)
                .map(|(k, _)| k.clone())
        {
            self.held.remove(&oldest);
        }
        self.held.insert(
            state,
            Held {
                keys,
                asked_host,
                expires: shared.now + HELD_FOR,
            },
        );
    }

    /// Starts following a request sent to the server as `request` under `server_id`.
    fn start(
        &mut self,
        shared: &mut Shared,
        host_id: &[u8],
        server_id: &[u8],
        request: Vec<u8>,
        mrtr: bool,
        host_roots: bool,
    ) {
        if self.exchanges.len() >= MAX_EXCHANGES
            && let Some(oldest) = self
                .exchanges
                .iter()
                .min_by_key(|(_, e)| e.started)
                .map(|(k, _)| k.clone())
            && let Some(dropped) = self.exchanges.remove(&oldest)
            && dropped.cancelled.is_none()
        {
            shared.emit(Output::ToHost(message::internal_error(
                &dropped.host_id,
                "too many requests in flight through rootsctl proxy; this, the oldest, was abandoned",
            )));
        }
        self.exchanges.insert(
            json::id_key(server_id),
            Exchange {
                host_id: host_id.to_vec(),
                request,
                rounds: 0,
                mrtr,
                host_roots,
                cancelled: None,
                started: shared.now,
            },
        );
    }

    fn last_sent(&self, server_id: &[u8]) -> Vec<u8> {
        self.exchanges[&json::id_key(server_id)].request.clone()
    }

    /// The id to send a host request under: its own, unless one of the proxy's requests in
    /// flight holds it.
    fn server_id_for(&mut self, shared: &Shared, host_id: &[u8]) -> Vec<u8> {
        if self.id_taken(host_id) {
            self.proxy_id(shared, "relay")
        } else {
            host_id.to_vec()
        }
    }

    /// Whether a request of the proxy's own in flight holds the host's id. Every request of the
    /// host asks, so the common answer (nothing of the proxy's is in flight) costs no key.
    fn id_taken(&self, host_id: &[u8]) -> bool {
        if self.probe.is_none() && self.exchanges.is_empty() {
            return false;
        }
        let key = json::id_key_ref(host_id);
        self.probe.as_deref() == Some(&key[..])
            || self
                .exchanges
                .get(&*key)
                .is_some_and(|e| *json::id_key_ref(&e.host_id) != *key)
    }

    /// A fresh id for a request of the proxy's own: one no request in flight holds, neither the
    /// host's nor the proxy's.
    fn proxy_id(&mut self, shared: &Shared, kind: &str) -> Vec<u8> {
        loop {
            self.next_id += 1;
            let id = serde_json::to_vec(&format!("{PROXY_ID_PREFIX}{kind}-{}", self.next_id))
                .expect("strings always serialise");
            let key = json::id_key(&id);
            if !shared.in_flight.contains_key(&key)
                && !self.exchanges.contains_key(&key)
                && self.probe.as_deref() != Some(&key[..])
            {
                return id;
            }
        }
    }

    /// Learns the server's identity from a result's `_meta`, once.
    fn learn_server_info(&mut self, shared: &mut Shared, msg: &Msg<'_>) {
        if shared.state.server.is_some() {
            return;
        }
        if let Some(info) = msg
            .at(&["result", "_meta", META_SERVER_INFO])
            .and_then(|span| message::server_info(msg.text, span))
        {
            shared.state.server = Some(info);
        }
    }

    /// A 2026-07-28 server that has not named itself yet is asked, once, with the proxy's own
    /// `server/discover`, so that `rootsctl sessions` can show it; the answer stays here.
    fn maybe_probe(&mut self, shared: &mut Shared) {
        if self.probed || shared.state.era != Era::Stateless || shared.state.server.is_some() {
            return;
        }
        let Some(meta) = self.last_meta.clone() else {
            return;
        };
        self.probed = true;
        let id = self.proxy_id(shared, "discover");
        let mut request = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        request.extend_from_slice(&id);
        request.extend_from_slice(br#","method":"server/discover","params":{"_meta":"#);
        request.extend_from_slice(&meta);
        request.extend_from_slice(b"}}");
        self.probe = Some(json::id_key(&id));
        shared.emit(Output::ToServer(request));
    }
}

/// Takes the host's own roots from its retry's answers to the roots/list entries it was given.
fn learn_from_retry(shared: &mut Shared, msg: &Msg<'_>, keys: &[String]) {
    let answer = keys.iter().find_map(|key| {
        msg.at(&["params", "inputResponses", key])
            .and_then(|span| json::parse::<Value>(msg.text, span))
            .and_then(|value| host_roots::roots_of(&value))
    });
    match answer {
        Some(roots) => {
            host_roots::learn(shared, &roots);
        }
        None => host_roots::refused(shared),
    }
}

/// `request` (a host's retry) with `inputResponses[key]` set to the roots for every `key`.
fn add_roots_answers(shared: &mut Shared, request: &[u8], keys: &[String]) -> Vec<u8> {
    let Some(span) = json::root(request) else {
        return request.to_vec();
    };
    let mut editor = Editor::new(request);
    let existing = json::at(request, span, &["params", "inputResponses"]);
    let added = match existing {
        // Each answer joins the host's own.
        Some(responses) if json::is_object(request, responses) => keys
            .iter()
            .try_for_each(|key| editor.set(responses, key, &shared.roots.json)),
        Some(_) => None,
        // The host answered nothing: one new `inputResponses` with every answer, since the
        // editor reads the original line and would add one `inputResponses` per key.
        None => {
            let answers = roots_answers(shared, keys);
            editor.ensure(span, &["params"], "inputResponses", &answers, false)
        }
    };
    if added.is_none() {
        return request.to_vec();
    }
    shared.note_fetch();
    editor.finish()
}

/// `{"key": {"roots": […]}, …}`: the roots as the answer to each of `keys`.
fn roots_answers(shared: &Shared, keys: &[String]) -> Vec<u8> {
    let mut answers = Vec::from(&b"{"[..]);
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            answers.push(b',');
        }
        answers.extend_from_slice(&serde_json::to_vec(key).expect("strings always serialise"));
        answers.push(b':');
        answers.extend_from_slice(&shared.roots.json);
    }
    answers.push(b'}');
    answers
}

/// The raw id of a request the proxy built or edited (it always has one).
fn id_of(request: &[u8]) -> Vec<u8> {
    json::root(request)
        .and_then(|span| json::get(request, span, "id"))
        .map(|span| span.of(request).to_vec())
        .unwrap_or_else(|| b"null".to_vec())
}

/// The error a host gets when the server needs roots that the proxy does not have.
fn no_roots(host_id: &[u8]) -> Vec<u8> {
    message::internal_error(
        host_id,
        "the server asked for roots, but rootsd is not reachable and rootsctl proxy has no list to give; retry once rootsd is back",
    )
}
