//! What one session may make the daemon hold: its report's texts cut to their bounds, the
//! table's size and each user's share of it, and `sessions.list` in pages that fit a line.
//! Numbers in [`crate::limits`].

use rootsd_proto::session::SessionState;
use rootsd_proto::wire::{SessionInfo, code};

use crate::error::RequestError;
use crate::limits::{
    MAX_SESSIONS, SESSION_PROTOCOL_VERSION_BYTES, SESSION_TEXT_BYTES, SESSION_WITHHELD_BYTES,
    SESSIONS_PAGE_BYTES, SESSIONS_PER_UID, SESSIONS_RESERVED,
};

/// `text` cut to at most `max` bytes at a character boundary.
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        // Truncating keeps the capacity, which is what memory holds.
        text.shrink_to_fit();
    }
    text
}

/// A session's label as the daemon keeps it.
pub fn label(label: String) -> String {
    cut(label, SESSION_TEXT_BYTES)
}

/// A session's report as the daemon keeps it: display texts cut, withheld roots listed only as
/// far as [`SESSION_WITHHELD_BYTES`] (their counts stay whole).
pub fn state(mut state: SessionState) -> SessionState {
    state.protocol_version = state
        .protocol_version
        .map(|version| cut(version, SESSION_PROTOCOL_VERSION_BYTES));
    if let Some(server) = state.server.as_mut() {
        server.name = cut(std::mem::take(&mut server.name), SESSION_TEXT_BYTES);
        server.version = cut(std::mem::take(&mut server.version), SESSION_TEXT_BYTES);
    }
    let mut bytes = 0;
    state.withheld.roots.retain(|root| {
        bytes += root.uri.len() + root.name.as_ref().map_or(0, String::len);
        bytes <= SESSION_WITHHELD_BYTES
    });
    state
}

/// Whether a new session of `uid` fits: the table holds `total` sessions, `of_uid` of them
/// `uid`'s, `of_others` those of users other than the daemon's own and root. `privileged` is
/// the daemon's own user or root, who may use the whole table.
pub fn admit(
    uid: u32,
    privileged: bool,
    total: usize,
    of_uid: usize,
    of_others: usize,
) -> Result<(), RequestError> {
    let refuse = |why: String| {
        Err(RequestError::new(
            code::LIMIT,
            format!(
                "{why}; nothing was registered: end sessions you no longer use (rootsctl sessions lists them), or ask rootsd's administrator"
            ),
        ))
    };
    if total >= MAX_SESSIONS {
        return refuse(format!(
            "rootsd holds {total} sessions, its limit (MAX_SESSIONS = {MAX_SESSIONS})"
        ));
    }
    if privileged {
        return Ok(());
    }
    if of_uid >= SESSIONS_PER_UID {
        return refuse(format!(
            "uid {uid} holds {of_uid} sessions, the most one user other than rootsd's own and root may hold (SESSIONS_PER_UID = {SESSIONS_PER_UID})"
        ));
    }
    if of_others >= MAX_SESSIONS - SESSIONS_RESERVED {
        return refuse(format!(
            "other users hold {of_others} sessions; the last {SESSIONS_RESERVED} of rootsd's {MAX_SESSIONS} are kept for its own user and root (SESSIONS_RESERVED)"
        ));
    }
    Ok(())
}

/// As many of `sessions` (by id, lowest first) as fit in one answer
/// ([`SESSIONS_PAGE_BYTES`] of JSON after the first), and whether some were left.
pub fn page(sessions: impl Iterator<Item = SessionInfo>) -> (Vec<SessionInfo>, bool) {
    let mut page = Vec::new();
    let mut bytes = 0;
    for info in sessions {
        let size = serde_json::to_vec(&info).map_or(0, |json| json.len());
        if !page.is_empty() && bytes + size > SESSIONS_PAGE_BYTES {
            return (page, true);
        }
        bytes += size;
        page.push(info);
    }
    (page, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rootsd_proto::session::ServerInfo;
    use rootsd_proto::wire::{WithheldReason, WithheldRoot};

    #[test]
    fn every_text_of_a_report_is_cut_to_its_bound_at_a_character_boundary() {
        let mut report = SessionState {
            protocol_version: Some("9".repeat(1 << 20)),
            server: Some(ServerInfo {
                name: "é".repeat(1 << 19),
                version: "v".repeat(1 << 20),
            }),
            ..SessionState::default()
        };
        report.withheld.outside_map = 1000;
        report.withheld.roots = (0..1000)
            .map(|i| WithheldRoot {
                uri: format!("file:///{}{i}", "d".repeat(1000)),
                name: None,
                reason: WithheldReason::OutsideMap,
            })
            .collect();
        let kept = state(report);
        assert_eq!(
            kept.protocol_version.as_deref().map(str::len),
            Some(SESSION_PROTOCOL_VERSION_BYTES)
        );
        let server = kept.server.unwrap();
        assert!(
            server.name.len() <= SESSION_TEXT_BYTES && server.name.len() >= SESSION_TEXT_BYTES - 1
        );
        assert_eq!(server.version.len(), SESSION_TEXT_BYTES);
        let listed: usize = kept.withheld.roots.iter().map(|r| r.uri.len()).sum();
        assert!(listed <= SESSION_WITHHELD_BYTES && !kept.withheld.roots.is_empty());
        assert_eq!(kept.withheld.outside_map, 1000, "the count stays whole");
        assert_eq!(label("ł".repeat(10_000)).len(), SESSION_TEXT_BYTES);
    }

    #[test]
    fn others_get_a_share_and_stop_short_of_the_reserve_the_owner_and_root_do_not() {
        assert!(admit(2000, false, 0, 0, 0).is_ok());
        let share = admit(2000, false, 5000, SESSIONS_PER_UID, SESSIONS_PER_UID).unwrap_err();
        assert_eq!(share.code, code::LIMIT);
        assert!(
            share.message.contains("SESSIONS_PER_UID = 2048"),
            "{}",
            share.message
        );
        let reserve = MAX_SESSIONS - SESSIONS_RESERVED;
        let kept = admit(2000, false, reserve, 0, reserve).unwrap_err();
        assert!(
            kept.message.contains("kept for its own user and root"),
            "{}",
            kept.message
        );
        assert!(admit(1000, true, reserve, reserve, reserve).is_ok());
        let full = admit(1000, true, MAX_SESSIONS, 0, 0).unwrap_err();
        assert!(
            full.message.contains("MAX_SESSIONS = 16384"),
            "{}",
            full.message
        );
        assert!(
            full.message.contains("nothing was registered"),
            "{}",
            full.message
        );
    }
}
