//! The import graph of every crate in the workspace, read from the sources: one node a module
//! file, one edge for each `crate::…` or `super::…` path a module names (in a `use` or in code),
//! pointing at the module file that defines what it names. A cycle in it is two modules that
//! each need the other, which no layering can explain; `no_module_imports_one_that_imports_it_back`
//! fails naming each.
//!
//! Modules are found the way rustc finds them: from each crate root, through `mod name;`
//! declarations (and their `#[path]`), so a module's path is the one the code uses. Inline
//! modules (`mod tests { … }`) are skipped: they are test code inside their file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's modules: each module's path (`["store", "start"]`) and the file that holds it.
pub struct Crate {
    pub modules: BTreeMap<Vec<String>, PathBuf>,
}

/// The crate roots of the workspace's packages: libraries, binaries, integration tests, fuzz
/// targets. Any directory of the workspace with a `Cargo.toml` is a package, so a new crate is
/// checked without a change here.
pub fn crate_roots(workspace: &Path) -> Vec<PathBuf> {
    let mut packages: Vec<PathBuf> = std::fs::read_dir(workspace)
        .expect("list the workspace")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    packages.sort();
    let mut roots = Vec::new();
    for package in packages {
        for root in ["src/lib.rs", "src/main.rs"] {
            let path = package.join(root);
            if path.is_file() {
                roots.push(path);
            }
        }
        for dir in ["src/bin", "tests", "fuzz_targets", "benches", "examples"] {
            let Ok(entries) = std::fs::read_dir(package.join(dir)) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter_map(|p| {
                    if p.extension().is_some_and(|e| e == "rs") {
                        Some(p)
                    } else if p.join("main.rs").is_file() {
                        Some(p.join("main.rs"))
                    } else {
                        None
                    }
                })
                .collect();
            found.sort();
            roots.extend(found);
        }
    }
    roots
}

/// Lines of `text` outside inline modules and comments.
fn module_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut inline = false;
    for line in text.lines() {
        if inline {
            // rustfmt closes a top-level inline module at column 0.
            inline = line != "}";
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if !line.starts_with(' ') && is_inline_module(trimmed) {
            inline = true;
            continue;
        }
        lines.push(line);
    }
    lines
}

fn is_inline_module(line: &str) -> bool {
    let rest = line.strip_prefix("pub ").unwrap_or(line);
    let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
    rest.strip_prefix("mod ")
        .is_some_and(|r| r.trim_end().ends_with('{'))
}

/// The `mod name;` declarations of a module file, each with its `#[path]` if it has one.
fn declarations(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut path = None;
    for line in module_lines(text) {
        let line = line.trim();
        if let Some(attr) = line.strip_prefix("#[path = \"") {
            path = attr.strip_suffix("\"]").map(str::to_owned);
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let rest = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        if let Some(name) = rest.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            found.push((name.trim().to_owned(), path.take()));
        } else {
            path = None;
        }
    }
    found
}

/// Every module of the crate rooted at `root`.
pub fn read_crate(root: &Path) -> Crate {
    let mut modules = BTreeMap::new();
    let mut pending = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((path, file)) = pending.pop() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let dir = file.parent().expect("a file has a directory").to_path_buf();
        let owns_dir = file == root || file.file_name().is_some_and(|n| n == "mod.rs");
        for (name, attr) in declarations(&text) {
            let child = match attr {
                Some(attr) => dir.join(attr),
                None => {
                    let base = if owns_dir {
                        dir.clone()
                    } else {
                        dir.join(file.file_stem().expect("a file stem"))
                    };
                    let flat = base.join(format!("{name}.rs"));
                    if flat.is_file() {
                        flat
                    } else {
                        base.join(&name).join("mod.rs")
                    }
                }
            };
            let mut child_path = path.clone();
            child_path.push(name);
            pending.push((child_path, child));
        }
        modules.insert(path, file);
    }
    Crate { modules }
}

/// The paths that `text`, the module at `module`, names through `crate::` or `super::`, made
/// absolute (from the crate root). A grouped `use crate::{a, b::{c, d}}` names `a`, `b::c` and
/// `b::d`.
pub fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let code = module_lines(text).join("\n");
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let starts_word = at == 0 || !is_ident(bytes[at - 1]) && bytes[at - 1] != b':';
        let (base, skip) = if starts_word && rest.starts_with("crate::") {
            (Some(Vec::new()), "crate::".len())
        } else if starts_word && rest.starts_with("super::") {
            let mut base = module.to_vec();
            let mut skip = 0;
            while code[at + skip..].starts_with("super::") {
                base.pop();
                skip += "super::".len();
            }
            (Some(base), skip)
        } else {
            (None, rest.chars().next().map_or(1, char::len_utf8))
        };
        at += skip;
        if let Some(base) = base {
            let (tree, used) = use_tree(&code[at..]);
            at += used;
            for tail in tree {
                let mut path = base.clone();
                // `self` in a group names the module the group is in.
                path.extend(tail.into_iter().filter(|segment| segment != "self"));
                found.push(path);
            }
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The paths of a use tree at the start of `text` (`a::b`, `a::{b, c::d}`, `{a, b}`), and how
/// many bytes it took.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let bytes = text.as_bytes();
    let mut prefix = Vec::new();
    let mut at = 0;
    loop {
        let start = at;
        while at < bytes.len() && is_ident(bytes[at]) {
            at += 1;
        }
        if at > start {
            prefix.push(text[start..at].to_owned());
        }
        if text[at..].starts_with("::{") || (at == 0 && text.starts_with('{')) {
            at += if text[at..].starts_with("::{") { 3 } else { 1 };
            let mut paths = Vec::new();
            loop {
                while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b',') {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    at += 1;
                    break;
                }
                let (inner, used) = use_tree(&text[at..]);
                if used == 0 {
                    at += 1;
                    continue;
                }
                at += used;
                for tail in inner {
                    let mut path = prefix.clone();
                    path.extend(tail);
                    paths.push(path);
                }
            }
            return (paths, at);
        }
        if text[at..].starts_with("::")
            && text[at + 2..].starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '{')
        {
            at += 2;
            continue;
        }
        return (vec![prefix], at);
    }
}

/// The import graph of `krate`: for each module file, the module files it names.
pub fn graph(krate: &Crate) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, file) in &krate.modules {
        let text = std::fs::read_to_string(file).expect("read a module");
        let targets = edges.entry(file.clone()).or_default();
        for path in named_paths(module, &text) {
            // The longest prefix that is a module is the module defining what the path names.
            let target = (0..=path.len())
                .rev()
                .find_map(|n| krate.modules.get(&path[..n]));
            if let Some(target) = target
                && target != file
            {
                targets.insert(target.clone());
            }
        }
    }
    edges
}

/// Every cycle of `graph`, one for each strongly connected component with more than one node,
/// as the nodes of one loop through it, starting from its smallest.
pub fn cycles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    let nodes: Vec<&N> = graph
        .iter()
        .flat_map(|(n, ts)| std::iter::once(n).chain(ts))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let reaches = |from: &N, to: &N| -> Option<Vec<N>> {
        // Breadth first, so that the loop reported is a shortest one.
        let mut previous: BTreeMap<&N, &N> = BTreeMap::new();
        let mut frontier = vec![from];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for node in frontier {
                for target in graph.get(node).into_iter().flatten() {
                    if previous.contains_key(target) {
                        continue;
                    }
                    previous.insert(target, node);
                    if target == to {
                        let mut path = vec![to.clone()];
                        let mut at = to;
                        while let Some(&p) = previous.get(at) {
                            if p == from {
                                break;
                            }
                            path.push(p.clone());
                            at = p;
                        }
                        path.push(from.clone());
                        path.reverse();
                        return Some(path);
                    }
                    next.push(target);
                }
            }
            frontier = next;
        }
        None
    };
    let mut seen: BTreeSet<N> = BTreeSet::new();
    let mut found = Vec::new();
    for node in nodes {
        if seen.contains(node) {
            continue;
        }
        if let Some(mut path) = reaches(node, node) {
            path.pop();
            // Every node on a loop through `node` is in its component: report the component once.
            let component: Vec<N> = graph
                .keys()
                .filter(|other| {
                    *other == node
                        || (reaches(node, other).is_some() && reaches(other, node).is_some())
                })
                .cloned()
                .collect();
            seen.extend(component);
            found.push(path);
        }
    }
    found
}
