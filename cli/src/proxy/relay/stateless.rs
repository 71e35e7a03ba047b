//! The 2026-07-28 era: no handshake, no server-to-client requests. Every request declares the
//! client's capabilities in `_meta`, and a server that needs roots answers a `tools/call`,
//! `prompts/get` or `resources/read` with an `input_required` result; the client retries the
//! request under a new id with the answers (SEP-2322, "MRTR").
//!
//! The proxy declares `roots: {}` on the host's requests and carries each such request through
//! its rounds: a result asking only for roots is answered and retried here, unseen by the host; a
//! result that also asks for elicitation or sampling goes to the host without the roots part,
//! which the proxy adds to the host's retry.

use std::collections::HashMap;

use rootsd_proto::session::{Era, SessionState};
use serde_json::{Map, Value};

use super::message::{id_key, internal_error, object_at, object_in, server_info, to_line};
use super::{Availability, Fate, Output, Shared};

/// `_meta` key carrying the protocol version of a 2026-07-28 request.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client capabilities of a 2026-07-28 request.
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key a 2026-07-28 server may put its identity under.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Methods whose results may be `input_required` (SEP-2322).
const MRTR_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
/// How many times the proxy retries one request on its own before giving up, as the SDKs do.
pub const MAX_MRTR_ROUNDS: u32 = 10;
/// Prefix of the ids the proxy gives its own retries; a string, so it never equals a host's
/// numeric id, and distinctive, so it never equals a host's string id in practice.
const RETRY_ID_PREFIX: &str = "rootsd-retry-";

/// One host request the proxy is carrying through `input_required` rounds.
struct Exchange {
    host_id: Value,
    /// The request as last sent to the server.
    request: Value,
    rounds: u32,
}

/// The 2026-07-28 era's state.
#[derive(Default)]
pub(super) struct Stateless {
    /// In-flight requests, keyed by the id the server knows them by.
    exchanges: HashMap<String, Exchange>,
    /// `roots/list` keys of `input_required` results passed to the host, keyed by their
    /// `requestState`, to be answered when the host retries.
    held: HashMap<String, Vec<String>>,
    /// Exchanges whose `roots/list` input requests wait for the daemon's first list.
    parked: Vec<(Exchange, Value)>,
    next_retry: u64,
}

/// A 2026-07-28 request carries its protocol version in `_meta`.
pub(super) fn is_modern(message: &Value) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some()
}

impl Stateless {
    /// A 2026-07-28 request from the host: declare roots, and follow it if its result may ask
    /// for them.
    pub(super) fn host_request(
        &mut self,
        shared: &mut Shared,
        message: &mut Value,
        method: &str,
        id: Value,
    ) -> Fate {
        note_modern(&mut shared.state, message);
        add_roots_capability(message);
        if MRTR_METHODS.contains(&method) {
            self.answer_held(shared, message);
            self.exchanges.insert(
                id_key(&id),
                Exchange {
                    host_id: id,
                    request: message.clone(),
                    rounds: 0,
                },
            );
        }
        Fate::Rewritten
    }

    /// Whether a response with `id` is one the proxy must look at: a request it follows, or
    /// any result while the server's identity is still unknown (2026-07-28 servers name
    /// themselves in each result's `_meta`).
    pub(super) fn awaits_response(&self, state: &SessionState, id: &Value) -> bool {
        self.exchanges.contains_key(&id_key(id))
            || (state.server.is_none() && state.era == Era::Stateless)
    }

    /// Learns the server's identity from a result's `_meta`, once.
    pub(super) fn learn_server_info(&mut self, shared: &mut Shared, message: &Value) {
        if shared.state.server.is_some() {
            return;
        }
        let pointer = format!("/result/_meta/{}", META_SERVER_INFO.replace('/', "~1"));
        if let Some(info) = message.pointer(&pointer) {
            shared.state.server = Some(server_info(info));
        }
    }

    /// A response from the server: if it answers a request the proxy follows, finish that round.
    pub(super) fn server_response(
        &mut self,
        shared: &mut Shared,
        id: &Value,
        message: &mut Value,
    ) -> Fate {
        let Some(exchange) = self.exchanges.remove(&id_key(id)) else {
            return Fate::Unchanged;
        };
        match self.finish_exchange(shared, exchange, std::mem::take(message)) {
            Some(response) => {
                *message = response;
                Fate::Rewritten
            }
            None => Fate::Dropped,
        }
    }

    /// The host cancels a request the proxy is retrying under another id: cancel that id.
    pub(super) fn translate_cancel(&mut self, message: &mut Value) -> Fate {
        let Some(host_id) = message.pointer("/params/requestId").cloned() else {
            return Fate::Unchanged;
        };
        let current = self
            .exchanges
            .values()
            .find(|e| e.host_id == host_id)
            .map(|e| e.request["id"].clone());
        match (current, message.pointer_mut("/params/requestId")) {
            (Some(current), Some(request_id)) if *request_id != current => {
                *request_id = current;
                Fate::Rewritten
            }
            _ => Fate::Unchanged,
        }
    }

    /// The daemon's first list arrived: finish the exchanges that waited for it.
    pub(super) fn resume_parked(&mut self, shared: &mut Shared) {
        for (exchange, response) in std::mem::take(&mut self.parked) {
            if let Some(response) = self.finish_exchange(shared, exchange, response) {
                shared.emit(Output::ToHost(to_line(&response)));
            }
        }
    }

    /// The proxy stopped waiting for the daemon: fail the exchanges that waited for it.
    pub(super) fn refuse_parked(&mut self, shared: &mut Shared) {
        for (exchange, _) in std::mem::take(&mut self.parked) {
            let error = internal_error(
                exchange.host_id,
                "the server asked for roots, but rootsd is not reachable; retry once it is",
            );
            shared.emit(Output::ToHost(to_line(&error)));
        }
    }

    /// Answers `roots/list` entries of an `input_required` result and retries, or passes the
    /// result to the host. Returns what the host should get now, if anything.
    fn finish_exchange(
        &mut self,
        shared: &mut Shared,
        mut exchange: Exchange,
        mut response: Value,
    ) -> Option<Value> {
        response["id"] = exchange.host_id.clone();
        let Some(result) = response.get("result") else {
            return Some(response);
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Some(response);
        }
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let roots_keys: Vec<String> = requests
            .iter()
            .filter(|(_, r)| r.get("method").and_then(Value::as_str) == Some("roots/list"))
            .map(|(k, _)| k.clone())
            .collect();
        if roots_keys.is_empty() {
            return Some(response);
        }
        let state = result.get("requestState").cloned();
        if roots_keys.len() < requests.len() {
            // Elicitation or sampling is mixed in: only the host can answer those. Pass them on
            // and answer the roots part when the host retries with the same requestState.
            if let Some(Value::String(state)) = &state {
                self.held.insert(state.clone(), roots_keys.clone());
            }
            if let Some(requests) = response
                .pointer_mut("/result/inputRequests")
                .and_then(Value::as_object_mut)
            {
                for key in &roots_keys {
                    requests.remove(key);
                }
            }
            return Some(response);
        }
        if shared.roots.availability() == Availability::Awaited {
            // No list yet: answering now would tell the server there are no roots.
            self.parked.push((exchange, response));
            return None;
        }
        if exchange.rounds >= MAX_MRTR_ROUNDS {
            return Some(internal_error(
                exchange.host_id,
                &format!(
                    "the server still asked for roots after {MAX_MRTR_ROUNDS} rounds; rootsctl proxy gave up on this request"
                ),
            ));
        }
        self.next_retry += 1;
        let retry_id = Value::String(format!("{RETRY_ID_PREFIX}{}", self.next_retry));
        let mut request = exchange.request.clone();
        request["id"] = retry_id.clone();
        if let Some(params) = object_at(&mut request, "params") {
            let mut answers = Map::new();
            for key in roots_keys {
                answers.insert(key, shared.roots.value());
            }
            params.insert("inputResponses".to_owned(), Value::Object(answers));
            match state {
                Some(state) => params.insert("requestState".to_owned(), state),
                None => params.remove("requestState"),
            };
        }
        shared.note_fetch();
        shared.emit(Output::ToServer(to_line(&request)));
        exchange.request = request;
        exchange.rounds += 1;
        self.exchanges.insert(id_key(&retry_id), exchange);
        None
    }

    /// A host retry of a request whose roots part the proxy owes: add the roots answers.
    fn answer_held(&mut self, shared: &mut Shared, message: &mut Value) {
        let Some(state) = message
            .pointer("/params/requestState")
            .and_then(Value::as_str)
        else {
            return;
        };
        let Some(keys) = self.held.remove(state) else {
            return;
        };
        let roots = shared.roots.value();
        if let Some(params) = object_at(message, "params")
            && let Some(responses) = object_in(params, "inputResponses")
        {
            for key in keys {
                responses.insert(key, roots.clone());
            }
        }
        shared.note_fetch();
    }
}

/// The session speaks 2026-07-28: note the era and the version the request carries.
fn note_modern(state: &mut SessionState, message: &Value) {
    if state.era == Era::Stateless {
        return;
    }
    state.era = Era::Stateless;
    state.protocol_version = message
        .pointer("/params/_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
        .map(str::to_owned);
}

/// Adds `roots: {}` to the request's client capabilities, keeping whatever the host declared.
fn add_roots_capability(message: &mut Value) {
    let Some(params) = object_at(message, "params") else {
        return;
    };
    let Some(meta) = object_in(params, "_meta") else {
        return;
    };
    if let Some(capabilities) = object_in(meta, META_CLIENT_CAPABILITIES) {
        capabilities
            .entry("roots".to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}
