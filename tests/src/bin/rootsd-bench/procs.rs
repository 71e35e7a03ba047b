//! Processes and numbers the measurements share: the benchmark's helper programs, a child that
//! speaks in lines, a greeted control connection, memory figures from `/proc`, percentiles.
//! Nothing here decides what is measured.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use rootsd_tests::{Memory, Sandbox, bench_wire};

/// How long any single wait may take before the benchmark gives up with an error.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A helper program of this benchmark, next to `rootsd-bench` in the target directory.
pub fn helper(name: &str) -> Command {
    Command::new(rootsd_tests::bin(name))
}

/// A child that talks in lines on stdin and stdout; killed when dropped.
pub struct LineChild {
    pub child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
    what: String,
}

impl LineChild {
    pub fn spawn(mut cmd: Command, what: &str) -> Result<Self> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {what}"))?;
        Ok(Self {
            to: child.stdin.take(),
            from: BufReader::new(child.stdout.take().expect("piped stdout")),
            child,
            what: what.to_owned(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, line: &str) -> Result<()> {
        let to = self.to.as_mut().expect("stdin is open until drop");
        writeln!(to, "{line}")
            .and_then(|()| to.flush())
            .with_context(|| format!("write to {}", self.what))
    }

    /// The next line, without its newline; an error naming the child if it exited instead.
    pub fn read_line(&mut self) -> Result<String> {
        let mut line = String::new();
        let n = self
            .from
            .read_line(&mut line)
            .with_context(|| format!("read from {}", self.what))?;
        if n == 0 {
            let status = self.child.wait()?;
            bail!("{} exited ({status}) instead of answering", self.what);
        }
        line.truncate(line.trim_end_matches('\n').len());
        Ok(line)
    }

    /// Waits for `expected` as the next line.
    pub fn expect_line(&mut self, expected: &str) -> Result<()> {
        let line = self.read_line()?;
        ensure!(
            line == expected,
            "{} said {line:?}, expected {expected:?}",
            self.what
        );
        Ok(())
    }
}

impl Drop for LineChild {
    fn drop(&mut self) {
        self.to = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A greeted connection to rootsd's control socket that sends lines and reads answers.
pub struct Control {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: String,
    /// Bytes read from rootsd so far: what it wrote to this connection.
    pub received: u64,
}

impl Control {
    pub fn connect(socket: &Path) -> Result<Self> {
        let stream = UnixStream::connect(socket)
            .with_context(|| format!("connect to rootsd at {}", socket.display()))?;
        stream.set_read_timeout(Some(PATIENCE))?;
        let mut control = Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            line: String::new(),
            received: 0,
        };
        control.send(&bench_wire::hello(0))?;
        let hello = control.read()?;
        ensure!(
            bench_wire::is_success(hello),
            "rootsd refused hello: {hello}"
        );
        Ok(control)
    }

    pub fn send(&mut self, line: &str) -> Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .context("write to rootsd's socket")
    }

    /// The next line from rootsd.
    pub fn read(&mut self) -> Result<&str> {
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .context("read from rootsd's socket")?;
        ensure!(n > 0, "rootsd closed the connection");
        self.received += n as u64;
        Ok(self.line.trim_end())
    }

    /// Sends a request and checks that it succeeded (the connection receives nothing else).
    pub fn call(&mut self, line: &str) -> Result<()> {
        self.send(line)?;
        self.expect_success()
    }

    pub fn expect_success(&mut self) -> Result<()> {
        let answer = self.read()?;
        ensure!(
            bench_wire::is_success(answer),
            "rootsd refused a request: {answer}"
        );
        Ok(())
    }
}

/// A process's memory, read from `/proc` by the harness.
pub fn memory(pid: u32) -> Result<Memory> {
    rootsd_tests::memory(pid).with_context(|| format!("read the memory of process {pid}"))
}

/// The `q` quantile (0..=1) of `samples` by nearest rank; sorts them.
pub fn quantile(samples: &mut [f64], q: f64) -> f64 {
    assert!(!samples.is_empty(), "a quantile of no samples");
    samples.sort_by(f64::total_cmp);
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

pub fn median(samples: &mut [f64]) -> f64 {
    quantile(samples, 0.5)
}

/// Which side runs first on turn `turn`: rootsd on even turns, the limit on odd ones, so that
/// neither always inherits the machine from the other.
pub fn rootsd_first(turn: usize) -> [bool; 2] {
    if turn.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// The length of rootsd's journal in `sandbox`'s state directory.
pub fn journal_len(sandbox: &Sandbox) -> Result<u64> {
    let journal = sandbox.state.join("roots.journal");
    Ok(std::fs::metadata(&journal)
        .with_context(|| format!("stat {}", journal.display()))?
        .len())
}

/// Makes one change with `change` and returns what it returned and how much rootsd's journal
/// grew by: the size of a change's record, which the limits write in its place.
pub fn record_of<T>(sandbox: &Sandbox, change: impl FnOnce() -> Result<T>) -> Result<(T, u64)> {
    let before = journal_len(sandbox)?;
    let made = change()?;
    let after = journal_len(sandbox)?;
    ensure!(
        after > before,
        "rootsd's journal did not grow with a change ({before} → {after} bytes; compacted meanwhile?); run the phase again"
    );
    Ok((made, after - before))
}

/// `file://` URI of an existing directory.
pub fn uri_of(path: &Path) -> String {
    url::Url::from_file_path(path)
        .expect("an absolute path")
        .to_string()
}

/// The CPU time all threads of process `pid` have run so far, in nanoseconds (the first field of
/// each `/proc/PID/task/TID/schedstat`).
pub fn cpu_ns(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut total = 0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("list {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing took its time with it.
        if let Ok(stat) = std::fs::read_to_string(&path) {
            total += first_number(&stat, &path)?;
        }
    }
    Ok(total)
}

/// The CPU time the calling thread has run so far, in nanoseconds.
pub fn thread_cpu_ns() -> Result<u64> {
    let path = Path::new("/proc/thread-self/schedstat");
    let stat = std::fs::read_to_string(path).context("read /proc/thread-self/schedstat")?;
    first_number(&stat, path)
}

fn first_number(stat: &str, path: &Path) -> Result<u64> {
    stat.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("{} holds no run time: {stat:?}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.5), 50.0);
        assert_eq!(quantile(&mut v, 0.99), 99.0);
        assert_eq!(quantile(&mut v, 1.0), 100.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    }
}
