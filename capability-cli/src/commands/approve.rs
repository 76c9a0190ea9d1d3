//! `capability approve` and `capability keygen`: the human side of the write gate.
//!
//! `approve` shows the proposal as it will be signed (every character a terminal could hide or
//! reorder escaped), then asks; without a terminal it signs only with `--yes`. `keygen` never
//! overwrites a file or follows a symlink.

use std::fs::File;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use capability::audit::time::utc_at;
use capability::gate::{Approval, MAX_VALIDITY_SECS, ProposalFile, SecretKey, SystemClock};

use capability_gateway::escape::escape;

use crate::Failure;
use crate::out::{self, Out};

fn read(path: &Path, what: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read the {what} `{}`: {e}", path.display())))
}

/// What `capability approve` was asked to do.
#[derive(clap::Args, Debug)]
pub struct Request {
    /// The approver's secret key file (from `capability keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// The approver's name, as the write gate knows them.
    #[arg(long)]
    pub approver: String,
    /// The write gate the approval is for (its `WriteGate::new` audience, e.g. `prod-eu`);
    /// any other gate refuses it.
    #[arg(long)]
    pub audience: String,
    /// How long the approval stays valid, in seconds (at most 86400, 24 hours).
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub expires_in: u64,
    /// Sign without asking (required when standard input is not a terminal). Review the
    /// proposal first.
    #[arg(long)]
    pub yes: bool,
    /// Where to write the approval (default: standard output). An existing file is refused
    /// unless `--force` is given; a symbolic link is never written through.
    #[arg(long = "out", value_name = "FILE")]
    pub approval_file: Option<PathBuf>,
    /// Replace the `--out` file if it exists (a symbolic link there is replaced, not
    /// followed).
    #[arg(long)]
    pub force: bool,
    /// The proposal file.
    pub proposal: PathBuf,
}

/// Shows a proposal file, asks, and signs it with a key file.
pub fn approve(request: &Request, out: &mut Out) -> Result<u8, Failure> {
    if request.expires_in > MAX_VALIDITY_SECS {
        return Err(Failure::input(format!(
            "`--expires-in {}` is over the maximum of {MAX_VALIDITY_SECS} s (24 hours); an \
             approval is for one change soon, not standing permission",
            request.expires_in
        )));
    }
    let path = &request.proposal;
    let file = ProposalFile::from_json(&read(path, "proposal")?)
        .map_err(|e| Failure::input(format!("`{}`: {e}", path.display())))?;
    if let Some(meant) = file.audience.as_ref().filter(|a| **a != request.audience) {
        return Err(Failure::input(format!(
            "the proposal is for audience `{}`, not `{}`; nothing signed",
            escape(meant),
            escape(&request.audience)
        )));
    }
    let secret = SecretKey::from_text(&read(&request.key, "key file")?)
        .map_err(|e| Failure::input(format!("`{}`: {e}", request.key.display())))?;
    let now = capability::gate::Clock::now(&SystemClock);
    if let Some(waited) = file.expires_at.filter(|at| *at <= now) {
        return Err(Failure::input(format!(
            "the proposal stopped waiting for an approval at {} (it is now {}): retry the call \
             for a fresh one; nothing signed",
            utc_at(waited),
            utc_at(now)
        )));
    }
    let expires_at = now.saturating_add(request.expires_in);
    out::note(show(&file, request, expires_at));
    confirm(request.yes)?;
    let approval = Approval::sign(
        &file,
        &request.approver,
        &request.audience,
        &secret,
        now,
        expires_at,
    )
    .map_err(|e| Failure::input(e.to_string()))?;
    out::note(format_args!(
        "approved `{}` for `{}`: approval {}",
        escape(&file.tool),
        escape(&request.audience),
        approval.id
    ));
    let text = approval.to_json();
    match &request.approval_file {
        // Never through a symbolic link, and never over a file without `--force`.
        Some(path) => {
            capability_gateway::files::write(path, (text + "\n").as_bytes(), request.force)
                .map_err(|e| Failure::input(e.to_string()))?
        }
        None => writeln!(out, "{text}")?,
    }
    Ok(0)
}

/// The proposal as the approver reviews it.
fn show(file: &ProposalFile, request: &Request, expires_at: u64) -> String {
    let args = serde_json::to_string_pretty(&file.args).unwrap_or_default();
    let args = args.lines().map(escape).collect::<Vec<_>>().join("\n    ");
    let meant = file.audience.as_deref().map_or(String::new(), |a| {
        format!(" (the proposal names `{}`)", escape(a))
    });
    let id = file
        .id
        .as_deref()
        .map_or(String::new(), |id| format!("  proposal:  {}\n", escape(id)));
    format!(
        "approving:\n{id}  tool:      {}\n  type:      {}\n  provider:  {}\n  audience:  {}{meant}\n  \
         proposer:  {} (proposed at {}; signed: the approval runs only for this caller)\n  rationale: {}\n  approver:  {}\n  expires:   in {} s (at {})\n  \
         arguments:\n    {args}",
        escape(&file.tool),
        escape(&file.tool_type),
        escape(file.provider.as_deref().unwrap_or("-")),
        escape(&request.audience),
        escape(&file.proposer),
        utc_at(file.created_at),
        escape(&file.rationale),
        escape(&request.approver),
        request.expires_in,
        utc_at(expires_at),
    )
}

/// Asks on the terminal; without one, `--yes` must have been given.
fn confirm(yes: bool) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Failure::input(
            "standard input is not a terminal, so nobody can confirm: review the proposal above \
             and pass `--yes` to sign it; nothing signed",
        ));
    }
    let _ = write!(std::io::stderr().lock(), "sign this approval? [y/N] ");
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::input(format!("cannot read the answer: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(Failure::input("not confirmed; nothing signed"))
    }
}

/// Writes a new key pair, never over an existing file or through a symlink.
pub fn keygen(key_file: &Path, out: &mut Out) -> Result<u8, Failure> {
    let key = SecretKey::generate().map_err(|e| Failure::input(e.to_string()))?;
    let public: PathBuf = {
        let mut name = key_file.as_os_str().to_owned();
        name.push(".pub");
        name.into()
    };
    // Both files are created before either is written: `create_new` refuses any existing path,
    // a symlink (even a dangling one) included, so nothing is overwritten or followed.
    let mut secret_file = create_new(key_file, 0o600)?;
    let mut public_file = match create_new(&public, 0o644) {
        Ok(file) => file,
        Err(failure) => {
            // The secret file is ours, just made and empty: take it back.
            drop(secret_file);
            let _ = std::fs::remove_file(key_file);
            return Err(failure);
        }
    };
    let written = |path: &Path, result: std::io::Result<()>| {
        result.map_err(|e| Failure::input(format!("cannot write `{}`: {e}", path.display())))
    };
    written(key_file, secret_file.write_all(key.to_text().as_bytes()))?;
    written(
        &public,
        public_file.write_all(key.public_key().to_text().as_bytes()),
    )?;
    writeln!(
        out,
        "wrote the secret key to {} and the public key to {}",
        key_file.display(),
        public.display()
    )?;
    Ok(0)
}

/// A new file at `path`, or a failure when anything (a file, a symlink) is there already.
fn create_new(path: &Path, mode: u32) -> Result<File, Failure> {
    capability_gateway::files::create_new(path, mode).map_err(|e| Failure::input(e.to_string()))
}
