//! Sessions that publish their host's roots (`rootsctl proxy --host-roots publish`): a
//! publication, the declines a removal by hand leaves, and the withdrawal when a session ends.
//! The planning is [`crate::provenance`]'s; this is where it meets the session table.

use std::collections::BTreeMap;

use rootsd_proto::Root;
use rootsd_proto::wire::PublishResult;

use super::{Registry, Session, SessionRecord};
use crate::error::RequestError;
use crate::provenance;
use crate::store::{Origin, StoredPublisherV1};

/// A session that published a root the user removed, and the root's URI.
pub(super) type Decline = (u64, String);

impl Session<'_> {
    /// Publishes `roots`, the host's whole list, as everything this session publishes in its
    /// workspace, and waits until that is durable.
    pub async fn publish(&self, roots: Vec<Root>) -> Result<PublishResult, RequestError> {
        let roots = provenance::canonical_publication(roots)?;
        let (workspace, me, origin, declined) = {
            let mut sessions = self.registry.sessions.lock().expect("sessions lock");
            let record = sessions
                .get_mut(&self.id)
                .expect("a live session has its record");
            // A root the host no longer offers may come back once it does again.
            record
                .declined
                .retain(|uri| roots.iter().any(|r| r.uri == *uri));
            record.published = true;
            (
                record.workspace.clone(),
                publisher(self.id, record),
                origin(self.id, record),
                record.declined.clone(),
            )
        };
        let kept: Vec<Root> = roots
            .into_iter()
            .filter(|r| !declined.contains(&r.uri))
            .collect();
        let mut result = self
            .registry
            .commit(|pending| {
                Ok(provenance::plan_publish(
                    pending, &workspace, &me, &kept, origin,
                ))
            })
            .await?;
        result.declined = declined.into_iter().collect();
        Ok(result)
    }
}

impl Registry {
    /// The user removed roots that these sessions published: they do not publish them again
    /// until their hosts drop them.
    pub(super) fn decline(&self, declines: Vec<Decline>) {
        decline_in(&mut self.sessions.lock().expect("sessions lock"), declines);
    }

    /// Withdraws what session `id` published, now that it ended. Nobody waits for this change:
    /// it is synced with the next group, and a crash before that is covered by the withdrawal
    /// at start-up.
    pub(super) fn withdraw(&self, id: u64, record: &SessionRecord) {
        let me = publisher(id, record);
        let withdrawn = self.committer.write(|pending| {
            Ok::<_, RequestError>(provenance::plan_withdraw(
                pending,
                &record.workspace,
                &me,
                origin(id, record),
            ))
        });
        if let Err(error) = withdrawn {
            tracing::error!(
                session = id,
                %error,
                "could not withdraw the roots of a session that ended; rootsd withdraws them at its next start"
            );
        }
    }
}

/// [`Registry::decline`] in `sessions`.
pub(super) fn decline_in(sessions: &mut BTreeMap<u64, SessionRecord>, declines: Vec<Decline>) {
    for (session, uri) in declines {
        if let Some(record) = sessions.get_mut(&session) {
            record.declined.insert(uri);
        }
    }
}

/// Who makes the changes of session `id`, for the history.
fn origin(id: u64, record: &SessionRecord) -> Origin {
    Origin::session(id, &record.label, record.peer.clone())
}

/// A session as the roots it publishes name it.
fn publisher(id: u64, record: &SessionRecord) -> StoredPublisherV1 {
    StoredPublisherV1 {
        session: id,
        label: record.label.clone(),
        pid: record.pid,
    }
}
