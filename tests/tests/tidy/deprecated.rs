//! No deprecated API kept behind `#[allow(deprecated)]`. tokio deprecated `AsyncFd`'s safe
//! constructors as unsound, and an allowance was how two calls of them stayed out of the count of
//! `unsafe` (issue 36). A deprecation is met by the API that replaced it or, where that one is
//! `unsafe`, in the one module allowed `unsafe`, with the reason it is sound.

use super::{code_lines, every_rust_file, relative};

/// Files still allowed a deprecated API, each with why. A file here that no longer needs it
/// fails the check too, so that the list only shrinks.
const STILL_ALLOWED: &[(&str, &str)] = &[(
    "daemon/src/connection/peer_socket.rs",
    "the daemon's socket registration: its sound form is `unsafe`, which only the proxy's \
     `process/raw.rs` may hold, so the daemon's own change must replace it",
)];

/// The code lines of `text` that lift the `deprecated` lint, by `allow` or `expect`, plain or
/// under `cfg_attr`, on an item or a whole module.
fn deprecation_allowances(text: &str) -> Vec<usize> {
    const LIFTS: [&str; 5] = [
        "#[allow(",
        "#![allow(",
        "#[expect(",
        "#![expect(",
        "#[cfg_attr(",
    ];
    code_lines(text)
        .filter(|(_, line)| {
            let line = line.trim_start();
            LIFTS.iter().any(|lift| line.starts_with(lift)) && line.contains("deprecated")
        })
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn no_source_allows_a_deprecated_api() {
    let mut found = Vec::new();
    let mut still = Vec::new();
    for file in every_rust_file() {
        let name = relative(&file);
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let lines = deprecation_allowances(&text);
        if lines.is_empty() {
            continue;
        }
        if STILL_ALLOWED.iter().any(|(allowed, _)| *allowed == name) {
            still.push(name);
            continue;
        }
        found.extend(lines.iter().map(|n| format!("{name}:{n}")));
    }
    assert!(
        found.is_empty(),
        "a deprecated API is allowed here; use the API that replaced it, or, if that one is \
         `unsafe`, put the call in proxy/src/process/raw.rs with why it is sound:\n{}",
        found.join("\n")
    );
    let stale: Vec<&str> = STILL_ALLOWED
        .iter()
        .map(|(allowed, _)| *allowed)
        .filter(|allowed| !still.iter().any(|name| name == allowed))
        .collect();
    assert!(
        stale.is_empty(),
        "these files allow no deprecated API any more: drop them from STILL_ALLOWED: {stale:?}"
    );
}

#[test]
fn the_deprecation_check_would_see_an_allowance() {
    let sample = concat!(
        "// #[allow(deprecated)] in prose\n",
        "#[allow(deprecated)]\n",
        "fn f() {}\n",
        "    #![expect(dead_code, deprecated)]\n",
        "#[allow(dead_code)]\n",
        "#[cfg_attr(test, allow(deprecated))]\n",
        "#[deprecated(note = \"x\")]\n",
    );
    assert_eq!(deprecation_allowances(sample), vec![2, 4, 6]);
}
