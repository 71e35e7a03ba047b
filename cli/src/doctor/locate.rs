//! Which socket rootsctl uses and why: the rendezvous in the state directory, the environment,
//! or an explicit path ([`crate::locate`]). The one check that explains a proxy started by a host
//! with a stripped environment finding the same daemon as the user's shell.

use rootsd_proto::paths::{self, Environment};

use super::{Check, Outcome};
use crate::autostart::Target;
use crate::locate::{self, Source};

const NAME: &str = "which socket";

pub fn check(target: &Target, env: &Environment) -> Check {
    let socket = target.socket.display();
    let state_dir = target.state_dir.as_deref();
    match &target.source {
        Source::Explicit => {
            let running = state_dir
                .and_then(locate::recorded)
                .filter(|found| found.socket != target.socket);
            match running {
                Some(found) => Check::new(
                    NAME,
                    Outcome::Fail,
                    format!(
                        "{socket} is {}, but the rootsd running for this user's state directory listens on {} ({}): rootsctl would not reach it, and a rootsd it started would find the state directory taken",
                        target.source.describe(),
                        found.socket.display(),
                        found.source.describe()
                    ),
                )
                .fix(format!(
                    "unset ROOTSD_SOCKET (and drop --socket), or set it to {}",
                    found.socket.display()
                )),
                None => Check::new(
                    NAME,
                    Outcome::Ok,
                    format!("{socket}, {}", target.source.describe()),
                ),
            }
        }
        Source::Recorded { .. } => {
            let computed = paths::socket_path(env, None, state_dir);
            let also = if computed == target.socket {
                String::new()
            } else {
                format!(
                    "; this environment alone would point at {} ({}), but every rootsctl of this user follows the record, so all of them, proxies started by hosts included, reach this one daemon",
                    computed.display(),
                    if env.xdg_runtime_dir.is_some() {
                        "XDG_RUNTIME_DIR is set here"
                    } else {
                        "XDG_RUNTIME_DIR is not set here"
                    }
                )
            };
            Check::new(
                NAME,
                Outcome::Ok,
                format!("{socket}, {}{also}", target.source.describe()),
            )
        }
        Source::UserUnit | Source::Computed => Check::new(
            NAME,
            Outcome::Ok,
            format!("{socket}, {}", target.source.describe()),
        ),
    }
}
