//! The invariants ARCHITECTURE.md states as absences, checked where a program can check them, in
//! the spirit of rust-analyzer's tidy tests: a change that breaks one fails the build with the
//! rule it broke, instead of waiting for a reviewer to notice.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The source directories of the workspace's crates.
fn source_dirs() -> Vec<PathBuf> {
    [
        "proto/src",
        "relay/src",
        "client/src",
        "proxy/src",
        "hosts/src",
        "daemon/src",
        "daemon/tests",
        "cli/src",
        "tests/src",
        "tests/tests",
        "fuzz/fuzz_targets",
    ]
    .iter()
    .map(|d| workspace().join(d))
    .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Lines of `text` that are code: comments and doc comments are prose, which may name anything.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
}

#[test]
fn only_the_store_module_names_sled() {
    // This file spells out what it looks for, so it is no offender either.
    let allowed = [
        workspace().join("daemon/src/store/database/mod.rs"),
        PathBuf::from(file!()),
    ];
    let mut offenders = Vec::new();
    for file in source_dirs().iter().flat_map(|d| rust_files(d)) {
        if allowed.iter().any(|a| file.ends_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for (number, line) in code_lines(&text) {
            if line.contains("sled::") || line.contains("use sled") {
                offenders.push(format!("{}:{number}: {}", relative(&file), line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "only daemon/src/store/database/mod.rs may use sled (ARCHITECTURE.md, Invariants); found:\n{}",
        offenders.join("\n")
    );
    for manifest in [
        "proto/Cargo.toml",
        "relay/Cargo.toml",
        "client/Cargo.toml",
        "proxy/Cargo.toml",
        "hosts/Cargo.toml",
        "cli/Cargo.toml",
        "tests/Cargo.toml",
    ] {
        let text = std::fs::read_to_string(workspace().join(manifest)).expect("read a manifest");
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("sled")),
            "{manifest} depends on sled; only the daemon may"
        );
    }
}

/// The crates `package` depends on when built, directly or through another crate (normal edges
/// only: what its tests and build scripts use does not ship in it), with every feature on.
fn normal_dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(workspace())
        .args([
            "tree",
            "--package",
            package,
            "--edges",
            "normal",
            "--all-features",
            "--prefix",
            "none",
            "--offline",
            "--locked",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} tree: {e}"));
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let crates: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        crates.iter().any(|c| c == package),
        "unexpected cargo tree output:\n{tree}"
    );
    crates
}

/// Which of `forbidden` are among `crates`.
fn present<'a>(crates: &[String], forbidden: &[&'a str]) -> Vec<&'a str> {
    forbidden
        .iter()
        .copied()
        .filter(|f| crates.iter().any(|c| c == f))
        .collect()
}

#[test]
fn proto_depends_on_neither_tokio_nor_sled() {
    let crates = normal_dependencies("rootsd-proto");
    let found = present(&crates, &["tokio", "sled"]);
    assert!(
        found.is_empty(),
        "rootsd-proto depends on {found:?}, directly or through another crate; proto must not (ARCHITECTURE.md, Invariants):\n{}",
        crates.join("\n")
    );
}

/// The crates that do I/O (or wait on it) which the relay must never depend on.
const IO_CRATES: [&str; 6] = [
    "tokio",
    "sled",
    "interprocess",
    "rustix",
    "signal-hook",
    "signal-hook-tokio",
];

#[test]
fn the_relay_depends_on_no_io_library() {
    let crates = normal_dependencies("rootsd-relay");
    let found = present(&crates, &IO_CRATES);
    assert!(
        found.is_empty(),
        "rootsd-relay depends on {found:?}, directly or through another crate; the relay is a pure state machine and may depend on pure libraries only (ARCHITECTURE.md, Invariants):\n{}",
        crates.join("\n")
    );
    // The same check on the crate that does the proxy's I/O finds what it looks for.
    let proxy = present(&normal_dependencies("rootsd-proxy"), &IO_CRATES);
    assert!(
        proxy.contains(&"tokio") && proxy.contains(&"rustix"),
        "the check misses the proxy's I/O libraries: {proxy:?}"
    );
}

#[test]
fn the_host_editor_depends_on_no_tokio() {
    // `rootsctl hosts` edits files and reads /proc, with neither the daemon nor a runtime: it
    // runs before rootsctl starts one.
    let crates = normal_dependencies("rootsd-hosts");
    let found = present(&crates, &["tokio", "tokio-util", "interprocess"]);
    assert!(
        found.is_empty(),
        "rootsd-hosts depends on {found:?}, directly or through another crate; the host editor must not (ARCHITECTURE.md, Invariants):\n{}",
        crates.join("\n")
    );
    // The same check on the binary, which runs the proxy and talks to the daemon, finds tokio.
    let rootsctl = present(&normal_dependencies("rootsctl"), &["tokio", "tokio-util"]);
    assert_eq!(
        rootsctl,
        ["tokio", "tokio-util"],
        "the check misses rootsctl's runtime"
    );
}

/// The parsers of the hosts' TOML and YAML files, which only the host editor reads.
const HOST_FILE_PARSERS: [&str; 2] = ["toml_edit", "saphyr-parser"];

#[test]
fn the_client_library_depends_on_no_host_file_parser() {
    let crates = normal_dependencies("rootsd-client");
    let found = present(&crates, &HOST_FILE_PARSERS);
    assert!(
        found.is_empty(),
        "rootsd-client depends on {found:?}, directly or through another crate; only the host editor (rootsd-hosts) reads the hosts' TOML and YAML files (ARCHITECTURE.md, Invariants):\n{}",
        crates.join("\n")
    );
    let found = present(&crates, &["rootsd-hosts"]);
    assert!(found.is_empty(), "rootsd-client depends on rootsd-hosts");
    // The same check on the host editor finds what it looks for.
    assert_eq!(
        present(&normal_dependencies("rootsd-hosts"), &HOST_FILE_PARSERS),
        HOST_FILE_PARSERS,
        "the check misses the host editor's parsers"
    );
}

#[test]
fn the_proxy_depends_on_no_host_file_parser() {
    let crates = normal_dependencies("rootsd-proxy");
    let found = present(&crates, &HOST_FILE_PARSERS);
    assert!(
        found.is_empty(),
        "rootsd-proxy depends on {found:?}, directly or through another crate; only the host editor (rootsd-hosts) reads the hosts' TOML and YAML files (ARCHITECTURE.md, Invariants):\n{}",
        crates.join("\n")
    );
    let found = present(&crates, &["rootsd-hosts"]);
    assert!(found.is_empty(), "rootsd-proxy depends on rootsd-hosts");
}

#[test]
fn the_relay_does_no_io() {
    // Its dependencies cannot do I/O (above); nor may the standard library's I/O be used, nor
    // the clock be read.
    let relay = workspace().join("relay/src");
    let forbidden = [
        "std::io",
        "std::fs",
        "std::net",
        "std::process",
        "std::env",
        "std::time::SystemTime",
        "tokio",
        "println!",
        "eprintln!",
        "print!(",
        "Instant::now",
        "SystemTime::now",
    ];
    // The relay's own tests pick the instant their clock starts at; the relay never does.
    let test_modules = [
        "tests.rs",
        "tests/mod.rs",
        "transcript/mod.rs",
        "properties.rs",
    ];
    let mut offenders = Vec::new();
    for file in rust_files(&relay) {
        if test_modules.iter().any(|t| file.ends_with(t)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for (number, line) in code_lines(&text) {
            if let Some(what) = forbidden.iter().find(|f| line.contains(*f)) {
                offenders.push(format!(
                    "{}:{number}: {what}: {}",
                    relative(&file),
                    line.trim()
                ));
            }
        }
    }
    assert!(
        !rust_files(&relay).is_empty(),
        "no relay sources under {}",
        relay.display()
    );
    assert!(
        offenders.is_empty(),
        "the relay is a pure state machine: lines, the clock and the daemon's lists come in as arguments (ARCHITECTURE.md, Invariants); found:\n{}",
        offenders.join("\n")
    );
}

/// The files that may name a module's file with `#[path]`, each with why no ordinary layout can
/// hold it.
const PATH_ATTRIBUTE_EXEMPT: [(&str, &str); 1] = [(
    "fuzz/fuzz_targets/control_request.rs",
    "it runs the decoder's checks, daemon/tests/decoder/check.rs, which belong to another \
     package (fuzz/ is a workspace of its own), and no module path reaches another package's file",
)];

/// Every `.rs` file of the workspace, whatever its crate: all but build output, installed or
/// vendored dependencies (`vendor/sled` keeps its authors' rules) and hidden directories.
fn every_rust_file() -> Vec<PathBuf> {
    let skipped = ["target", "node_modules", "venv", "vendor"];
    let mut found = Vec::new();
    let mut pending = vec![workspace()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !name.starts_with('.') && !skipped.contains(&name) {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The code lines of `text` that are a `#[path = …]` attribute, plain or under `cfg_attr`.
fn path_attributes(text: &str) -> Vec<(usize, &str)> {
    code_lines(text)
        .filter(|(_, line)| {
            let Some(attribute) = line.trim_start().strip_prefix("#[") else {
                return false;
            };
            let is_path = |part: &str| {
                part.trim_start()
                    .strip_prefix("path")
                    .is_some_and(|r| r.trim_start().starts_with('='))
            };
            // Under `cfg_attr(condition, attr, …)` any of the attributes may be the path.
            match attribute.trim_start().strip_prefix("cfg_attr") {
                Some(rest) => rest.split([',', '(']).skip(1).any(is_path),
                None => is_path(attribute),
            }
        })
        .collect()
}

#[test]
fn no_module_is_loaded_by_a_path_attribute() {
    let files = every_rust_file();
    assert!(
        files.iter().any(|f| f.ends_with("dist/src/main.rs"))
            && files
                .iter()
                .any(|f| f.ends_with("fuzz/fuzz_targets/proxy_relay.rs")),
        "the walk finds every crate's sources"
    );
    let mut found = Vec::new();
    for file in &files {
        let name = relative(file);
        let text = std::fs::read_to_string(file).expect("read a source file");
        let attributes = path_attributes(&text);
        if let Some((_, why)) = PATH_ATTRIBUTE_EXEMPT.iter().find(|(f, _)| *f == name) {
            assert!(
                !attributes.is_empty(),
                "{name} is exempt from the #[path] check ({why}) but has no #[path] any more: drop the exemption"
            );
            continue;
        }
        for (number, line) in attributes {
            found.push(format!("{name}:{number}: {}", line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "a module's file is where rustc looks for it, so its place says what it is (ARCHITECTURE.md, \
         Invariants): make `x.rs` with child or test modules a folder (`x/mod.rs`, `x/tests.rs`), and an \
         integration test of several files `tests/NAME/main.rs`; found:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_path_check_would_see_an_attribute() {
    let sample = [
        "//! `#[path]` in prose is no attribute, nor is `#[path = \"a.rs\"]` in a comment.",
        "#[cfg(test)]",
        "#[path = \"x_tests.rs\"]",
        "mod tests;",
        "    #[path=\"nested.rs\"]",
        "    mod nested;",
        "#[cfg_attr(unix, path = \"unix.rs\")]",
        "mod os;",
        "// #[path = \"commented.rs\"]",
        "#[pathological]",
        "#[serde(path = \"not a module\")]",
        "fn f() -> &'static str { \"#[path = \\\"in a string\\\"]\" }",
    ]
    .join("\n");
    let lines: Vec<usize> = path_attributes(&sample).iter().map(|(n, _)| *n).collect();
    assert_eq!(lines, vec![3, 5, 7]);
}

#[test]
fn the_checks_above_would_see_a_violation() {
    let sample = "// sled:: in a comment is prose\nlet db = sled::open(path);\n";
    let hits: Vec<usize> = code_lines(sample)
        .filter(|(_, l)| l.contains("sled::"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(hits, vec![2]);
    assert!(
        rust_files(&workspace().join("daemon/src"))
            .iter()
            .any(|f| f.ends_with("store/database/mod.rs")),
        "the walk finds the daemon's sources"
    );
}

/// The one place allowed `unsafe`, and why. Everything else stays under the workspace's
/// `unsafe_code = "deny"`; an `#[allow(unsafe_code)]` anywhere else fails here.
const UNSAFE_ALLOWED: (&str, &str) = (
    "proxy/src/process/raw.rs",
    "the server's start: a clone sharing the proxy's memory, whose child sets PR_SET_PDEATHSIG and execs; and the runtime's registration of a descriptor, whose sound form is `unsafe`",
);

/// The code lines of `text` that lift the `unsafe_code` lint.
fn unsafe_allowances(text: &str) -> Vec<usize> {
    code_lines(text)
        .filter(|(_, line)| {
            let line = line.trim_start();
            line.starts_with("#[allow(") || line.starts_with("#![allow(")
        })
        .filter(|(_, line)| line.contains("unsafe_code"))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn unsafe_is_allowed_in_one_function_only() {
    let mut found = Vec::new();
    let mut allowed_seen = 0;
    for file in every_rust_file() {
        let name = relative(&file);
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let lines = unsafe_allowances(&text);
        if name == UNSAFE_ALLOWED.0 {
            allowed_seen = lines.len();
            continue;
        }
        found.extend(lines.iter().map(|n| format!("{name}:{n}")));
    }
    assert_eq!(
        allowed_seen, 1,
        "{} should lift `unsafe_code` exactly once ({})",
        UNSAFE_ALLOWED.0, UNSAFE_ALLOWED.1
    );
    assert!(
        found.is_empty(),
        "`unsafe` is denied workspace-wide but for {} (ARCHITECTURE.md, Invariants); found:\n{}",
        UNSAFE_ALLOWED.0,
        found.join("\n")
    );
    let manifest =
        std::fs::read_to_string(workspace().join("Cargo.toml")).expect("read Cargo.toml");
    assert!(
        manifest.contains("unsafe_code = \"deny\""),
        "the workspace denies unsafe_code"
    );
}

#[test]
fn the_unsafe_check_would_see_an_allowance() {
    let sample = "// #[allow(unsafe_code)] in prose\n#[allow(unsafe_code)]\nfn f() {}\n    #![allow(dead_code, unsafe_code)]\n";
    assert_eq!(unsafe_allowances(sample), vec![2, 4]);
}

mod changes;
mod deprecated;
mod imports;
mod limits;

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let roots = imports::crate_roots(&workspace());
    assert!(
        roots.iter().any(|r| r.ends_with("daemon/src/lib.rs"))
            && roots.iter().any(|r| r.ends_with("cli/src/main.rs")),
        "the crate roots are found: {roots:?}"
    );
    let mut found = Vec::new();
    for root in roots {
        let krate = imports::read_crate(&root);
        for cycle in imports::cycles(&imports::graph(&krate)) {
            let mut names: Vec<String> = cycle.iter().map(|f| relative(f)).collect();
            names.push(names[0].clone());
            found.push(names.join(" -> "));
        }
    }
    found.sort();
    found.dedup();
    assert!(
        found.is_empty(),
        "modules that import each other (ARCHITECTURE.md, Invariants): move what both need into \
         a module of its own, or to the side that owns it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_import_check_would_see_a_cycle() {
    use std::collections::{BTreeMap, BTreeSet};
    let graph = |edges: &[(&'static str, &'static str)]| {
        let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (from, to) in edges {
            graph.entry(from).or_default().insert(to);
            graph.entry(to).or_default();
        }
        graph
    };
    // a -> b -> c -> a is one cycle; d only leads into it, e -> f is no cycle at all.
    let looped = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "f")]);
    assert_eq!(imports::cycles(&looped), vec![vec!["a", "b", "c"]]);
    let two = graph(&[("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]);
    assert_eq!(imports::cycles(&two), vec![vec!["a", "b"], vec!["c", "d"]]);
    let layered = graph(&[("a", "b"), ("b", "c"), ("a", "c")]);
    assert!(imports::cycles(&layered).is_empty());

    // What the sources name: grouped uses, `super::` from a nested module, paths in code;
    // comments and inline test modules are not imports.
    let module = vec![
        "store".to_owned(),
        "start".to_owned(),
        "recovery".to_owned(),
    ];
    let text = "use crate::store::{self, journal::{Journal, read}, model};\n\
                use super::reconcile;\n\
                // use crate::commented::Out;\n\
                fn f() { crate::clock::unix_ms(); super::super::Face::new(); }\n\
                #[cfg(test)]\n\
                mod tests {\n    use crate::hidden;\n}\n";
    let named: BTreeSet<String> = imports::named_paths(&module, text)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    let expected: BTreeSet<String> = [
        "store",
        "store::journal::Journal",
        "store::journal::read",
        "store::model",
        "store::start::reconcile",
        "clock::unix_ms",
        "store::Face::new",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(named, expected);
}
