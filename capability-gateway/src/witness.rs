//! The library side of `capability audit witness` and `capability audit check-proof`: a
//! witness and a proof's checks made from the key files of `capability keygen`, so the command
//! only parses its arguments (the witness itself is `capability::audit::tlog::Witness`, its
//! HTTP protocol `capability_http::witness`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capability::audit::CheckpointVerifier;
use capability::audit::tlog::{
    Cosigner, KeyRotation, LogKey, LogKeys, TlogError, TlogProof, Witness, WitnessQuorum,
    check_proof_witnessed,
};
use capability::gate::{PublicKey, SecretKey};

/// The name a witness of the command cosigns under.
pub const WITNESS_NAME: &str = "capability-witness";

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn public_key(path: &Path) -> Result<PublicKey, String> {
    PublicKey::from_text(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// The witness signing with the secret key file `key`, keeping its state in `state`, for the
/// logs `logs` (each `<origin>=<public key file>`; an origin twice: two keys of that log).
pub fn open(key: &Path, state: &Path, logs: &[String]) -> Result<Witness, String> {
    let secret =
        SecretKey::from_text(&read(key)?).map_err(|e| format!("{}: {e}", key.display()))?;
    let cosigner = Cosigner::new(WITNESS_NAME, Box::new(secret)).map_err(|e| e.to_string())?;
    let mut keys = BTreeMap::<String, Vec<LogKey>>::new();
    for log in logs {
        let (origin, file) = log
            .split_once('=')
            .ok_or_else(|| format!("--log {log}: expected <origin>=<public key file>"))?;
        let key = Box::new(public_key(Path::new(file))?);
        keys.entry(origin.to_owned()).or_default().push(key);
    }
    Witness::open(cosigner, keys, state).map_err(|e| e.to_string())
}

/// What a proof file is checked against: the log's key files (several with rotation
/// statements), the witnesses' public key files and how many must have cosigned (default: all),
/// and the record's line when it is given apart from the proof.
#[derive(Clone, Copy, Debug)]
pub struct ProofCheck<'a> {
    /// The log's public key files.
    pub keys: &'a [PathBuf],
    /// Key rotation statements (`capability/key-rotation/v1`).
    pub rotations: &'a [PathBuf],
    /// Witnesses' public key files.
    pub witnesses: &'a [PathBuf],
    /// How many of them must have cosigned (`None`: all).
    pub needed: Option<usize>,
    /// The record's line.
    pub record: Option<&'a str>,
}

impl ProofCheck<'_> {
    /// Checks the proof file at `path`: `Err` for a file that cannot be read or used, else the
    /// verdict ([`check_proof_witnessed`]: what was shown, or what is wrong).
    pub fn check(&self, path: &Path) -> Result<Result<String, TlogError>, String> {
        let proof =
            TlogProof::parse(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        let all = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| public_key(p))
                .collect::<Result<Vec<_>, _>>()
        };
        let (keys, witnesses) = (all(self.keys)?, all(self.witnesses)?);
        let rotations = self
            .rotations
            .iter()
            .map(|p| KeyRotation::parse(&read(p)?).map_err(|e| format!("{}: {e}", p.display())))
            .collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<&dyn CheckpointVerifier> = keys.iter().map(|k| k as _).collect();
        let named = self.witnesses.iter().map(|p| p.display().to_string());
        let named = named.zip(witnesses.iter().map(|k| k as &dyn CheckpointVerifier));
        let quorum = WitnessQuorum::new(named.collect(), self.needed.unwrap_or(witnesses.len()));
        Ok(
            LogKeys::new(&proof.checkpoint.head.origin, &keys, &rotations)
                .and_then(|log| check_proof_witnessed(&proof, &log, &quorum, self.record)),
        )
    }
}
