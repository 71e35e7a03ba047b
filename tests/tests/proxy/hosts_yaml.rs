//! `rootsctl hosts` on YAML files as their real writers lay them out, by the real binary: a
//! Goose configuration written by PyYAML (sequences without indentation, a list shared by two
//! servers as an anchor and an alias) is wrapped so that every server reads as wrapped and comes
//! back byte for byte; a file whose edit would change another value (an anchored `cmd` that a
//! setting elsewhere names) is refused, naming that value, and left as it was.

use std::path::Path;
use std::process::Output;

use rootsd_tests::{Sandbox, output_within};
use serde_json::Value;

use crate::support::{as_user, assert_exit, stderr_of, stdout_of};

/// Written by PyYAML 6.0.3 (`hosts/src/fixtures/yaml/README.md` says how).
const PYYAML_GOOSE: &str =
    include_str!("../../../hosts/src/fixtures/yaml/pyyaml-goose-anchors.yaml");

/// `rootsctl hosts ARGS` with only `HOME` and `PATH`, as a user's shell runs it.
fn hosts(home: &Path, args: &[&str]) -> Output {
    output_within(
        as_user(&rootsd_tests::bin("rootsctl"), home)
            .arg("hosts")
            .args(args),
    )
}

/// Goose's servers as `rootsctl hosts --json` lists them: (name, behind rootsd).
fn goose_servers(home: &Path) -> Vec<(String, Option<bool>)> {
    let output = hosts(home, &["--json"]);
    assert_exit(&output, 0, "rootsctl hosts --json");
    let listed: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let goose = listed
        .iter()
        .find(|l| l["host"] == "goose")
        .expect("goose is listed");
    assert!(goose.get("error").is_none(), "{goose}");
    goose["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap().to_owned();
            (name, s["transport"]["wrapped"].as_bool())
        })
        .collect()
}

#[test]
fn a_goose_file_written_by_pyyaml_is_wrapped_and_unwrapped_byte_for_byte() {
    let sb = Sandbox::new();
    let home = sb.mkdir("home");
    let file = home.join(".config/goose/config.yaml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, PYYAML_GOOSE).unwrap();

    let output = hosts(&home, &["wrap", "goose"]);
    assert_exit(&output, 0, "rootsctl hosts wrap goose");
    assert!(
        stdout_of(&output).contains("wrapped 5 (filesystem, filesystem2, git, odd, bare)"),
        "{}",
        stdout_of(&output)
    );
    let servers = goose_servers(&home);
    for (name, wrapped) in &servers {
        let expect = match name.as_str() {
            "developer" | "remote" => None,
            _ => Some(true),
        };
        assert_eq!(*wrapped, expect, "{name}: {servers:?}");
    }

    let output = hosts(&home, &["unwrap", "goose"]);
    assert_exit(&output, 0, "rootsctl hosts unwrap goose");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), PYYAML_GOOSE);
}

#[test]
fn an_edit_that_would_change_another_value_is_refused_and_nothing_is_written() {
    let sb = Sandbox::new();
    let home = sb.mkdir("home");
    let file = home.join(".config/goose/config.yaml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let text = "extensions:\n  fs:\n    type: stdio\n    cmd: &runner npx\n    args: [-y, srv]\nGOOSE_RUNNER: *runner\n";
    std::fs::write(&file, text).unwrap();

    let output = hosts(&home, &["wrap", "goose"]);
    assert_exit(
        &output,
        1,
        "rootsctl hosts wrap goose, an anchored cmd named elsewhere",
    );
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("would change GOOSE_RUNNER from \"npx\"")
            && stderr.contains("it was not made"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let output = hosts(&home, &["unwrap", "goose"]);
    assert_exit(&output, 0, "rootsctl hosts unwrap goose");
    assert!(
        stdout_of(&output).contains("Nothing to unwrap"),
        "{}",
        stdout_of(&output)
    );
}
