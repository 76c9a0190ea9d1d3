//! `capability audit prove`, `check-proof` and `consistency`: evidence from a JSON Lines trail
//! that anyone holding the writer's public key can check alone (`capability::audit::tlog`); and
//! `capability audit witness`, which cosigns it (`capability_gateway::witness`).

use std::io::Write;
use std::path::{Path, PathBuf};

use capability::audit::tlog;
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
    /// A witness's URL: its cosignature is added to the checkpoint; repeat.
    #[arg(long = "witness", value_name = "URL")]
    witnesses: Vec<String>,
}

/// `capability audit check-proof`: a proof file checked alone.
#[derive(clap::Args, Debug)]
pub struct CheckProof {
    /// The proof file (`c2sp.org/tlog-proof@v1`).
    proof: PathBuf,
    /// The writer's public key file (`.pub`); repeat, with `--rotation`, for a rotated key.
    #[arg(long, value_name = "FILE", required = true)]
    key: Vec<PathBuf>,
    /// A key rotation statement (`capability/key-rotation/v1`); repeat.
    #[arg(long, value_name = "FILE")]
    rotation: Vec<PathBuf>,
    /// A witness's public key file: its cosignature on the checkpoint counts; repeat.
    #[arg(long = "witness-key", value_name = "FILE")]
    witness_keys: Vec<PathBuf>,
    /// How many `--witness-key` witnesses must have cosigned (default: all).
    #[arg(long, value_name = "K")]
    witnesses: Option<usize>,
    /// The record's JSON line, as the trail holds it; without it, the record in the proof.
    #[arg(long, value_name = "JSON")]
    record: Option<String>,
}

/// `capability audit witness`: a `c2sp.org/tlog-witness` server, cosigning as
/// `capability-witness`.
#[derive(clap::Args, Debug)]
pub struct WitnessArgs {
    /// The address to listen on (`127.0.0.1:0`: a free port, printed).
    #[arg(long, value_name = "ADDR")]
    listen: std::net::SocketAddr,
    /// The witness's secret key file (`capability keygen`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The state file: the last checkpoint cosigned per log.
    #[arg(long, value_name = "FILE")]
    state: PathBuf,
    /// A log witnessed: `<origin>=<public key file>`; repeat (a log twice: two keys).
    #[arg(long = "log", value_name = "ORIGIN=FILE", required = true)]
    logs: Vec<String>,
}

/// `capability audit witness-submit`: each writer's latest checkpoint taken to witnesses.
#[derive(clap::Args, Debug)]
pub struct WitnessSubmit {
    /// The trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
    #[arg(value_name = "PATH_OR_URL")]
    target: String,
    /// A witness's URL; repeat.
    #[arg(long = "witness", value_name = "URL", required = true)]
    witnesses: Vec<String>,
}

/// `capability audit rotate`: a writer's checkpoint key handed over to the next.
#[derive(clap::Args, Debug)]
pub struct Rotate {
    /// The trail: a JSON Lines file (its writer stopped), or a store.
    trail: PathBuf,
    /// The secret key file that signed the checkpoints until now.
    #[arg(long, value_name = "FILE")]
    old_key: PathBuf,
    /// The public key file of the key that signs them from now on.
    #[arg(long, value_name = "FILE")]
    new_key: PathBuf,
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
    let mut proof = tlog::prove_jsonl_stored(&args.trail, writer, seq, &key).map_err(input)?;
    let refused = capability_http::witness::cosign_all_blocking(
        &args.witnesses,
        &mut proof.checkpoint,
        &args.trail,
    );
    let Some(path) = &args.out else {
        out.write_all(proof.to_text().as_bytes())?;
        return Ok(u8::from(!refused.is_empty()));
    };
    capability_gateway::files::write(path, proof.to_text().as_bytes(), args.force)
        .map_err(|e| Failure::input(e.to_string()))?;
    let size = proof.checkpoint.head.size;
    writeln!(
        out,
        "{}: writer {writer} record {seq} in the signed tree of {size} records",
        path.display()
    )?;
    refused.iter().try_for_each(|e| writeln!(out, "{e}"))?;
    Ok(u8::from(!refused.is_empty()))
}

/// Checks a proof file (and its cosignatures); exit 1 saying what is wrong.
pub fn check_proof(args: &CheckProof, out: &mut Out) -> Result<u8, Failure> {
    let checked = capability_gateway::witness::ProofCheck {
        keys: &args.key,
        rotations: &args.rotation,
        witnesses: &args.witness_keys,
        needed: args.witnesses,
        record: args.record.as_deref(),
    };
    let checked = checked.check(&args.proof).map_err(Failure::input)?;
    let said = checked.clone().unwrap_or_else(|e| e.to_string());
    writeln!(out, "{}: {said}", args.proof.display())?;
    Ok(u8::from(checked.is_err()))
}

/// Serves until killed; exit 2 on a key, log or state it cannot use.
pub fn witness(args: &WitnessArgs, out: &mut Out) -> Result<u8, Failure> {
    let witness = capability_gateway::witness::open(&args.key, &args.state, &args.logs);
    let witness = witness.map_err(Failure::input)?;
    let vkey = witness.vkey();
    capability_http::witness::run(args.listen, witness, |at| {
        writeln!(out, "witness {vkey} on http://{at}")?;
        out.flush()
    })
    .map_err(|e| Failure::input(format!("the witness on {}: {e}", args.listen)))?;
    Ok(0)
}

/// Stores the witnesses' cosignatures beside each writer's latest checkpoint; exit 1 when one
/// refused or could not be asked.
pub fn witness_submit(args: &WitnessSubmit, out: &mut Out) -> Result<u8, Failure> {
    let done = capability_gateway::evidence::submit(&args.target, &args.witnesses);
    let done = done.map_err(Failure::input)?;
    done.lines.iter().try_for_each(|l| writeln!(out, "{l}"))?;
    Ok(u8::from(done.refused))
}

/// Records the rotation in the trail and prints its statement (for `check-proof --rotation`).
pub fn rotate(args: &Rotate, out: &mut Out) -> Result<u8, Failure> {
    let rotated = capability_gateway::evidence::rotate(&args.trail, &args.old_key, &args.new_key);
    out.write_all(rotated.map_err(Failure::input)?.to_text().as_bytes())?;
    Ok(0)
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
