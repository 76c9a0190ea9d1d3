//! `capability approve` and `capability keygen`: the human side of the write gate.

use std::io::Write;
use std::path::{Path, PathBuf};

use capability::gate::{Approval, ProposalFile, SecretKey, SystemClock};

use crate::Failure;
use crate::out::{self, Out};

fn read(path: &Path, what: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read the {what} `{}`: {e}", path.display())))
}

/// Signs a proposal file with a key file.
pub fn approve(
    key: &Path,
    approver: &str,
    expires_in: u64,
    approval_file: Option<&Path>,
    proposal: &Path,
    out: &mut Out,
) -> Result<u8, Failure> {
    let file = ProposalFile::from_json(&read(proposal, "proposal")?)
        .map_err(|e| Failure::input(format!("`{}`: {e}", proposal.display())))?;
    let secret = SecretKey::from_text(&read(key, "key file")?)
        .map_err(|e| Failure::input(format!("`{}`: {e}", key.display())))?;
    let now = capability::gate::Clock::now(&SystemClock);
    let approval = Approval::sign(&file, approver, &secret, now.saturating_add(expires_in))
        .map_err(|e| Failure::input(e.to_string()))?;
    out::note(format_args!(
        "approving `{}` for {} (proposed by {}: {}), valid {expires_in} s, approval {}",
        file.tool, file.args, file.proposer, file.rationale, approval.id
    ));
    let text = approval.to_json();
    match approval_file {
        Some(path) => std::fs::write(path, text + "\n")
            .map_err(|e| Failure::input(format!("cannot write `{}`: {e}", path.display())))?,
        None => writeln!(out, "{text}")?,
    }
    Ok(0)
}

/// Writes a new key pair.
pub fn keygen(key_file: &Path, out: &mut Out) -> Result<u8, Failure> {
    let key = SecretKey::generate().map_err(|e| Failure::input(e.to_string()))?;
    let public: PathBuf = {
        let mut name = key_file.as_os_str().to_owned();
        name.push(".pub");
        name.into()
    };
    if key_file.exists() {
        return Err(Failure::input(format!(
            "`{}` exists; not overwriting a key",
            key_file.display()
        )));
    }
    write_secret(key_file, &key.to_text())?;
    std::fs::write(&public, key.public_key().to_text())
        .map_err(|e| Failure::input(format!("cannot write `{}`: {e}", public.display())))?;
    writeln!(
        out,
        "wrote the secret key to {} and the public key to {}",
        key_file.display(),
        public.display()
    )?;
    Ok(0)
}

fn write_secret(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Failure::input(format!("cannot write `{}`: {e}", path.display())))
}
