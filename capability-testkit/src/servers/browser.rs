//! A real browser for the tests of pages: Debian's Chromium, installed by
//! `tests/browser/install-chromium.sh` when none is found, driven by
//! `tests/browser/approvals-page.mjs` over the DevTools protocol with puppeteer-core (pinned in
//! `tests/browser/package-lock.json`, installed with `npm ci` into `<target>/browser`).
//!
//! A test that needs it starts with `let Some(browser) = browser::require("my_test") else {
//! return };`, which skips it loudly when Chromium, Node.js or the install is missing, or
//! panics instead when `CAPABILITY_REQUIRE_BROWSER=1` (CI).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The environment variable that turns a skip into a failure (CI sets it to `1`).
pub const REQUIRE_ENV: &str = "CAPABILITY_REQUIRE_BROWSER";

/// The driver script, copied next to `node_modules`.
const DRIVER: &str = "approvals-page.mjs";

/// Chromium, and the driver next to its pinned puppeteer-core.
#[derive(Clone, Debug)]
pub struct Browser {
    /// The browser's program.
    pub chromium: PathBuf,
    /// `<target>/browser/approvals-page.mjs`.
    pub driver: PathBuf,
}

impl Browser {
    /// The driver on `url`, in the time zone `timezone`, running `ops` (see the script's
    /// header); run it with [`Command::output`].
    pub fn drive(&self, url: &str, timezone: &str, ops: &serde_json::Value) -> Command {
        let mut command = Command::new("node");
        command
            .arg(&self.driver)
            .arg("--chromium")
            .arg(&self.chromium)
            .args(["--url", url, "--timezone", timezone, "--ops"])
            .arg(ops.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }
}

/// The browser, or `None` after printing `SKIPPED: <test>: <reason>`; panics instead when
/// `CAPABILITY_REQUIRE_BROWSER=1`.
pub fn require(test: &str) -> Option<Browser> {
    static BROWSER: OnceLock<Result<Browser, String>> = OnceLock::new();
    match BROWSER.get_or_init(install) {
        Ok(browser) => Some(browser.clone()),
        Err(reason) if std::env::var(REQUIRE_ENV).is_ok_and(|v| v.trim() == "1") => {
            panic!("{test}: a browser is required ({REQUIRE_ENV}=1): {reason}")
        }
        Err(reason) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {test}: {reason}\n(set {REQUIRE_ENV}=1 to make this a failure)"
            );
            None
        }
    }
}

fn install() -> Result<Browser, String> {
    let source = super::workspace_root().join("tests").join("browser");
    let chromium = chromium(&source)?;
    let node_modules = super::npm_install(&source, &super::install_dir("browser"), &[DRIVER])?;
    let driver = node_modules
        .parent()
        .map(|dir| dir.join(DRIVER))
        .ok_or("no install directory")?;
    Ok(Browser { chromium, driver })
}

/// `/usr/bin/chromium`, installed by the project's script when missing.
fn chromium(source: &Path) -> Result<PathBuf, String> {
    let found = || {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
    };
    if let Some(path) = found() {
        return Ok(path);
    }
    let script = source.join("install-chromium.sh");
    let status = Command::new("sh")
        .arg(&script)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !status.success() {
        return Err(format!(
            "{} failed ({status}): Debian's chromium package is needed",
            script.display()
        ));
    }
    found().ok_or_else(|| format!("{} ran, and still no Chromium", script.display()))
}
