//! End-to-end tests of how rootsd is installed: the Debian package that scripts/deb builds with
//! cargo-deb (its exact contents; installed, upgraded and removed with dpkg when the tests run as
//! root, as in CI, or extracted with dpkg-deb elsewhere) and scripts/install (`--system` into a
//! staging prefix, `--user` into a private HOME, and `--uninstall`). Both must give binaries that
//! run, units that `systemd-analyze verify` accepts without a word, man pages that render without
//! a warning, and completions that bash, zsh and fish load, and neither may touch a user's roots.
//!
//! They package and install the binaries of this build (`cargo build --workspace --bins`, which
//! scripts/test runs), not a release build. They need cargo-deb (`cargo install cargo-deb
//! --locked`), dpkg-dev, man-db, groff-base, zsh, fish and systemd; a missing one fails the test
//! and says how to install it.

mod support;

mod checks;
mod deb;
mod install;
mod test_script;
