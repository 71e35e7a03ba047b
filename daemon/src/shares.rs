//! Each user's share of the daemon's connections: users other than the daemon's own and root
//! hold at most [`CONNECTIONS_PER_UID`] each and, together, stop [`CONNECTIONS_RESERVED`] short
//! of [`MAX_CONNECTIONS`], so that whatever a member of a shared service opens, the owner and
//! root can still connect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::limits::{CONNECTIONS_PER_UID, CONNECTIONS_RESERVED, MAX_CONNECTIONS};

/// The connections each user other than the privileged ones holds.
#[derive(Default)]
pub struct Shares {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Connections of users other than the daemon's own and root, together.
    others: usize,
    by_uid: HashMap<u32, usize>,
}

/// One connection's part of its user's share, given back when dropped.
pub struct Share {
    shares: Arc<Shares>,
    uid: Option<u32>,
}

impl Shares {
    /// Takes a connection for `uid`, unless its user or users like it hold their share; the
    /// refusal says which and what to do. `privileged` (the daemon's own user, root) always get
    /// theirs: only the total cap, enforced before accepting, bounds them.
    pub fn take(self: &Arc<Self>, uid: u32, privileged: bool) -> Result<Share, String> {
        if privileged {
            return Ok(Share {
                shares: self.clone(),
                uid: None,
            });
        }
        let mut held = self.held.lock().expect("shares lock");
        let of_uid = held.by_uid.get(&uid).copied().unwrap_or(0);
        if of_uid >= CONNECTIONS_PER_UID {
            return Err(format!(
                "uid {uid} holds {of_uid} connections to rootsd, the most one user other than rootsd's own and root may hold (CONNECTIONS_PER_UID = {CONNECTIONS_PER_UID}): close some (idle ones are closed after a while), then retry"
            ));
        }
        let others_limit = MAX_CONNECTIONS - CONNECTIONS_RESERVED;
        if held.others >= others_limit {
            return Err(format!(
                "other users hold {} connections to rootsd; the last {CONNECTIONS_RESERVED} of its {MAX_CONNECTIONS} are kept for its own user and root (CONNECTIONS_RESERVED): retry later",
                held.others
            ));
        }
        held.others += 1;
        *held.by_uid.entry(uid).or_default() += 1;
        Ok(Share {
            shares: self.clone(),
            uid: Some(uid),
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let Some(uid) = self.uid else { return };
        let mut held = self.shares.held.lock().expect("shares lock");
        held.others -= 1;
        if let Some(count) = held.by_uid.get_mut(&uid) {
            *count -= 1;
            if *count == 0 {
                held.by_uid.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gets_its_share_the_others_stop_short_of_the_reserve_and_shares_come_back() {
        let shares = Arc::new(Shares::default());
        let mine: Vec<Share> = (0..CONNECTIONS_PER_UID)
            .map(|_| shares.take(2000, false).unwrap())
            .collect();
        let refused = shares.take(2000, false).err().unwrap();
        assert!(refused.contains("CONNECTIONS_PER_UID = 2048"), "{refused}");
        assert!(
            shares.take(2001, false).is_ok(),
            "another user has a share of its own"
        );
        assert!(shares.take(0, true).is_ok() && shares.take(1000, true).is_ok());
        drop(mine);
        let again = shares.take(2000, false);
        assert!(again.is_ok(), "the share came back");
        drop(again);
        // Users together stop short of the reserve.
        let mut held = Vec::new();
        let mut uid = 3000;
        while held.len() < MAX_CONNECTIONS - CONNECTIONS_RESERVED {
            match shares.take(uid, false) {
                Ok(share) => held.push(share),
                Err(_) => uid += 1,
            }
        }
        let reserve = shares.take(uid + 1, false).err().unwrap();
        assert!(
            reserve.contains("kept for its own user and root"),
            "{reserve}"
        );
        assert!(shares.take(0, true).is_ok());
    }
}
