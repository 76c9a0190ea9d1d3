//! `capability audit prove`, `check-proof` and `consistency`: evidence from a JSON Lines trail
//! that anyone holding the writer's public key can check alone (`capability::audit::tlog`).

use std::io::Write;
use std::path::{Path, PathBuf};

use capability::audit::tlog::{self, TlogProof};
use capability::gate::{PublicKey, SecretKey};

use crate::Failure;
use crate::out::Out;

/// `capability audit prove`: one record's inclusion proof, with a checkpoint signed now.
#[derive(clap::Args, Debug)]
pub struct Prove {
    /// The JSON Lines trail.
    trail: PathBuf,
    /// The record: `<writer>:<seq>` (e.g. `replica-1:12`).
    #[arg(long, value_name = "WRITER:SEQ")]
    record: String,
    /// The secret key file (`capability keygen`) that signs the checkpoint.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Write the proof to this file (`.tlog-proof`) instead of standard output; never over a
    /// file without `--force`, never through a symbolic link.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace the `--out` file.
    #[arg(long)]
    force: bool,
}

/// `capability audit check-proof`: a proof file checked alone.
#[derive(clap::Args, Debug)]
pub struct CheckProof {
    /// The proof file (`c2sp.org/tlog-proof@v1`).
    proof: PathBuf,
    /// The writer's public key file (`.pub`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The record's JSON line, as the trail holds it; without it, the record in the proof.
    #[arg(long, value_name = "JSON")]
    record: Option<String>,
}

/// `capability audit consistency`: the newer checkpoint's tree extends the older one's.
#[derive(clap::Args, Debug)]
pub struct Consistency {
    /// The older checkpoint (a signed note, or a proof file holding one).
    old: PathBuf,
    /// The newer checkpoint.
    new: PathBuf,
    /// The JSON Lines trail both are of.
    #[arg(long, value_name = "FILE")]
    trail: PathBuf,
    /// The writer's public key file: checks both checkpoints' signatures too.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
}

fn read(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))
}

fn public_key(path: &Path) -> Result<PublicKey, Failure> {
    PublicKey::from_text(&read(path)?)
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))
}

fn input(e: tlog::TlogError) -> Failure {
    Failure::input(e.to_string())
}

/// Writes the proof; exit 2 on a trail, record or key it cannot use.
pub fn prove(args: &Prove, out: &mut Out) -> Result<u8, Failure> {
    let (writer, seq) = tlog::parse_record_ref(&args.record).map_err(input)?;
    let key = SecretKey::from_text(&read(&args.key)?)
        .map_err(|e| Failure::input(format!("{}: {e}", args.key.display())))?;
    let proof = tlog::prove_jsonl(&args.trail, writer, seq, &key).map_err(input)?;
    let Some(path) = &args.out else {
        out.write_all(proof.to_text().as_bytes())?;
        return Ok(0);
    };
    capability_gateway::files::write(path, proof.to_text().as_bytes(), args.force)
        .map_err(|e| Failure::input(e.to_string()))?;
    let size = proof.checkpoint.head.size;
    writeln!(
        out,
        "{}: writer {writer} record {seq} in the signed tree of {size} records",
        path.display()
    )?;
    Ok(0)
}

/// Checks a proof file; exit 1 saying what is wrong.
pub fn check_proof(args: &CheckProof, out: &mut Out) -> Result<u8, Failure> {
    let proof = TlogProof::parse(&read(&args.proof)?).map_err(input)?;
    let checked = tlog::check_proof(&proof, &public_key(&args.key)?, args.record.as_deref());
    writeln!(
        out,
        "{}: {}",
        args.proof.display(),
        checked
            .as_ref()
            .map_or_else(|e| e.to_string(), |p| p.to_string())
    )?;
    Ok(u8::from(checked.is_err()))
}

/// Shows the newer tree extends the older, printing the consistency proof; exit 1 when not.
pub fn consistency(args: &Consistency, out: &mut Out) -> Result<u8, Failure> {
    let key = args.key.as_deref().map(public_key).transpose()?;
    let key = key
        .as_ref()
        .map(|k| k as &dyn capability::audit::CheckpointVerifier);
    let (old, new) = (read(&args.old)?, read(&args.new)?);
    let extension = tlog::check_consistency_jsonl(&old, &new, &args.trail, key);
    writeln!(
        out,
        "{}",
        extension
            .as_ref()
            .map_or_else(|e| e.to_string(), |x| x.to_string())
    )?;
    Ok(u8::from(extension.is_err()))
}
