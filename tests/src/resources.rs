//! What the benchmark, the soak and the bounds tests read and raise of a process's resources:
//! its memory, and the number of descriptors it may hold.

/// A process's resident memory in KiB, from `/proc/PID/status`: now (`VmRSS`) and at its peak
/// (`VmHWM`).
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// The memory of process `pid` now; an error if it cannot be read (the process is gone).
pub fn memory(pid: u32) -> std::io::Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path)?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no {name} line in {path}")))
    };
    Ok(Memory {
        rss_kib: field("VmRSS")?,
        hwm_kib: field("VmHWM")?,
    })
}

/// Lets this process, and the processes it starts afterwards, hold `needed` descriptors at once
/// (thousands of connections need more than the usual 1024): the soft limit goes up to the hard
/// one, and the hard one up to `needed` where this process may raise it (as root). An error
/// says what to do when neither is enough.
pub fn raise_fd_limit(needed: u64) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.map_or(needed, |hard| hard.max(needed));
    let raised = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        },
    );
    if raised.is_ok() {
        return Ok(());
    }
    match limit.maximum {
        Some(hard) if hard < needed => Err(format!(
            "this needs {needed} file descriptors per process, but the hard limit is {hard}: raise \
             it (`ulimit -Hn {needed}` as root, or LimitNOFILE= in systemd)"
        )),
        _ => setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )
        .map_err(|error| format!("could not raise the file-descriptor limit: {error}")),
    }
}
