//! Adds and removals, answered on the commit thread once the change is durable
//! ([`crate::store::Call`]): a connection writes its answer straight to its socket from there,
//! and [`Registry::awaited`] (which [`Registry::add`] and [`Registry::remove`] use) waits for the
//! answer instead. What must follow the change's durability (the sessions that decline what was
//! removed, the count of those told of it) the call does first, on the commit thread, with
//! nothing of the registry but its session table: the commit thread must never hold the
//! registry, whose end stops it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use rootsd_proto::wire::{ChangeResult, RemoveTarget};
use rootsd_proto::{Root, WorkspaceName};

use super::plan::{plan_add, plan_remove};
use super::publish::{Decline, decline_in};
use super::{Registry, SessionRecord, canonical_roots, changed, durable, notified_in};
use crate::error::RequestError;
use crate::store::{Call, Contents, Origin, Plan, StoreError};

/// Told on the commit thread once a change is durable: how many sessions of its workspace hear
/// of it (its answer's `notified_sessions`), or why it failed. Must be quick and must not block,
/// as a [`Call`].
pub type Answer = Box<dyn FnOnce(Result<usize, StoreError>) + Send>;

impl Registry {
    /// A change that `start` asks for with an [`Answer`], awaited here: the result, its
    /// `notified_sessions` counted, once the change is durable.
    pub async fn awaited(
        &self,
        start: impl FnOnce(Answer) -> Result<(ChangeResult, bool), RequestError>,
    ) -> Result<ChangeResult, RequestError> {
        let (told, heard) = oneshot::channel();
        let (mut result, waits) = start(Box::new(move |outcome| {
            let _ = told.send(outcome);
        }))?;
        if waits {
            result.notified_sessions = durable(heard).await?;
        }
        Ok(result)
    }

    /// [`Registry::add`], answered by `answer` on the commit thread. Returns the result and
    /// whether `answer` waits for the change: if not, the result is whole and `answer` is
    /// dropped uncalled; if so, the result lacks only `notified_sessions`, which `answer` is
    /// told.
    pub fn add_answered(
        &self,
        workspace: &WorkspaceName,
        roots: Vec<Root>,
        origin: Origin,
        answer: Answer,
    ) -> Result<(ChangeResult, bool), RequestError> {
        let canonical = canonical_roots(roots)?;
        let (mut result, waits) = self.commit_answered(
            |pending| plan_add(pending, workspace, canonical, origin),
            |result| (result, &[]),
            answer,
        )?;
        if !waits {
            self.count_notified(&mut result);
        }
        Ok((result, waits))
    }

    /// [`Registry::remove`], answered by `answer` on the commit thread, as
    /// [`Registry::add_answered`].
    pub fn remove_answered(
        &self,
        workspace: &WorkspaceName,
        targets: Vec<RemoveTarget>,
        origin: Origin,
        answer: Answer,
    ) -> Result<(ChangeResult, bool), RequestError> {
        let ((mut result, declines), waits) = self.commit_answered(
            |pending| plan_remove(pending, workspace, &targets, origin),
            |(result, declines)| (result, declines),
            answer,
        )?;
        if !waits {
            self.decline(declines);
            self.count_notified(&mut result);
        }
        Ok((result, waits))
    }

    /// Plans a change and has `answer` told on the commit thread once it is durable.
    /// `parts` says where the plan's reply keeps its result and its declines.
    fn commit_answered<T>(
        &self,
        plan: impl FnOnce(&Contents) -> Result<Plan<T>, RequestError>,
        parts: impl FnOnce(&T) -> (&ChangeResult, &[Decline]),
        answer: Answer,
    ) -> Result<(T, bool), RequestError> {
        let sessions = self.sessions.clone();
        self.committer.write_calling(self.bounded(plan), |reply| {
            let (result, declines) = parts(reply);
            after_durable(sessions, result, declines.to_vec(), answer)
        })
    }
}

/// The call that, once `result`'s change is durable, records `declines` and tells `answer` how
/// many sessions hear of it; or tells it why the change failed.
fn after_durable(
    sessions: Arc<Mutex<BTreeMap<u64, SessionRecord>>>,
    result: &ChangeResult,
    declines: Vec<Decline>,
    answer: Answer,
) -> Call {
    let workspace: WorkspaceName = result.workspace.clone();
    let (revision, changed) = (result.revision, changed(result));
    Box::new(move |outcome| {
        answer(outcome.map(|()| {
            let mut sessions = sessions.lock().expect("sessions lock");
            // Only once the removal is durable: a removal that failed must not change what
            // sessions publish.
            decline_in(&mut sessions, declines);
            if changed {
                notified_in(&sessions, &workspace, revision)
            } else {
                0
            }
        }));
    })
}
