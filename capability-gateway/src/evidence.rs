//! The library side of `capability audit verify` and `capability audit witness-submit`: a
//! trail (a JSON Lines file, SQLite or PostgreSQL) checked whole, its report as text and as
//! JSON, and each writer's latest tree checkpoint taken to witnesses and stored back with
//! their cosignatures. The command only parses its arguments and prints.
//!
//! With the writers' public key, `verify` runs every check of `capability::audit::tlog` that
//! the trail alone allows: the chains and their checkpoints, the tree checkpoints against the
//! records, the writers' registrations, the spans without a checkpoint
//! ([`tlog::checkpoint_gaps`], at the interval of [`CheckpointEvery::default`], the one the
//! gateway's and the proxy's sinks sign at) and, given witnesses' keys, their cosignatures on
//! each writer's latest tree checkpoint ([`tlog::witnessed::unwitnessed`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use capability::audit::tlog::keys::{KeyRing, recorded_rotations};
use capability::audit::tlog::store_keys::store_key_problems;
use capability::audit::tlog::{self, KeyRotation, WitnessQuorum};
use capability::audit::{
    AuditRecord, ChainProblem, ChainsReport, CheckpointEvery, CheckpointVerifier, TrailCounts,
    VerifyReport, WriterReport,
};
use capability::gate::PublicKey;
use capability_store::{RowProblem, Store, TargetKind, target_kind};
use serde_json::{Value, json};

use crate::escape::escape;

mod rotate;

pub use rotate::rotate;

/// What `verify` checks besides the chains: the writers' key, the witnesses required, and
/// the time the trail is checked as of.
#[derive(Clone, Copy, Debug, Default)]
pub struct VerifyOptions<'a> {
    /// The writers' public key files (several: keys rotated, or writers of their own keys):
    /// the checkpoints, trees, gaps and witnesses are checked only with one.
    pub keys: &'a [PathBuf],
    /// Key rotation statements given apart from the trail (those recorded in it are read too).
    pub rotations: &'a [PathBuf],
    /// Witnesses' public key files whose cosignatures count.
    pub witness_keys: &'a [PathBuf],
    /// How many of them must have cosigned each writer's latest tree checkpoint (`None`: all).
    pub witnesses: Option<usize>,
    /// The time the trail is checked as of (RFC 3339 UTC: when a copy was taken); `None`: now.
    pub at: Option<&'a str>,
}

/// What `verify` found: its text (what the command prints), its JSON (`--json`), and a note
/// for standard error.
#[derive(Clone, Debug)]
pub struct Verified {
    /// Whether everything checked is intact.
    pub intact: bool,
    /// The report, one finding a line.
    pub text: String,
    /// The report as JSON.
    pub json: Value,
    /// A hint for standard error (what was not checked), if any.
    pub note: Option<String>,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn public_key(path: &Path) -> Result<PublicKey, String> {
    PublicKey::from_text(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// Opens a store to read from: a SQLite path that does not exist is an error, never a new
/// empty database (only `capability db migrate` creates one).
pub fn open_store(target: &str) -> Result<Box<dyn Store>, String> {
    if target_kind(target) == TargetKind::Sqlite && !Path::new(target).exists() {
        return Err(format!(
            "{target}: no such file (create a database with `capability db migrate {target}`)"
        ));
    }
    capability_store::open(target).map_err(|e| e.to_string())
}

/// The checks that read the tree checkpoints' times and cosignatures.
struct Findings {
    now: String,
    witnesses: Vec<(String, PublicKey)>,
    needed: usize,
}

impl Findings {
    fn new(options: &VerifyOptions<'_>) -> Result<Findings, String> {
        let now = match options.at {
            Some(at) if tlog::gaps::epoch_millis(at).is_some() => at.to_owned(),
            Some(at) => {
                return Err(format!(
                    "--at {at}: not a time as the trail writes them (YYYY-MM-DDTHH:MM:SS.mmmZ)"
                ));
            }
            None => capability::audit::time::utc_now(),
        };
        let witnesses = (options.witness_keys.iter())
            .map(|p| Ok((p.display().to_string(), public_key(p)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let needed = options.witnesses.unwrap_or(witnesses.len());
        if needed > witnesses.len() {
            return Err(format!(
                "--witnesses {needed}: only {} --witness-key given",
                witnesses.len()
            ));
        }
        Ok(Findings {
            now,
            witnesses,
            needed,
        })
    }

    /// Each writer's missing checkpoints (in time, over `records`) and missing cosignatures.
    fn of(&self, notes: &[String], records: &[AuditRecord]) -> BTreeMap<String, Vec<ChainProblem>> {
        let (notes, _) = tlog::stored::parse_notes(notes);
        let every = CheckpointEvery::default();
        let mut found = tlog::checkpoint_gaps(&notes, every.interval, &self.now);
        let mut counts = BTreeMap::<String, u64>::new();
        for record in records {
            *counts.entry(record.writer.clone()).or_default() += 1;
        }
        let uncovered = tlog::gaps::uncovered_records(&notes, &counts, every.records);
        merge(&mut found, uncovered);
        if !self.witnesses.is_empty() {
            let keys = (self.witnesses.iter())
                .map(|(label, key)| (label.clone(), key as &dyn CheckpointVerifier))
                .collect();
            let quorum = WitnessQuorum::new(keys, self.needed);
            for (writer, problems) in tlog::witnessed::unwitnessed(&notes, &quorum) {
                found.entry(writer).or_default().extend(problems);
            }
        }
        found
    }
}

/// Checks the trail `target` names; `Err` for a trail, key or option it cannot use.
pub fn verify(target: &str, options: &VerifyOptions<'_>) -> Result<Verified, String> {
    let keys = (options.keys.iter())
        .map(|p| public_key(p))
        .collect::<Result<Vec<_>, _>>()?;
    let keys: Vec<&dyn CheckpointVerifier> = keys.iter().map(|k| k as _).collect();
    let mut rotations = (options.rotations.iter())
        .map(|p| KeyRotation::parse(&read(p)?).map_err(|e| format!("{}: {e}", p.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let findings = Findings::new(options)?;
    let keyed = !keys.is_empty();
    if target_kind(target) == TargetKind::Jsonl {
        let path = Path::new(target);
        let (records, mut report) =
            capability::audit::read_jsonl(path).map_err(|e| e.to_string())?;
        let (recorded, mut found) = recorded_rotations(&records);
        rotations.extend(recorded);
        if let ([key], true) = (&keys[..], rotations.is_empty()) {
            report = tlog::verify_jsonl_with_trees(path, *key).map_err(|e| e.to_string())?;
        } else if keyed {
            let ring = KeyRing::new(&keys, rotations);
            let chains = ring.verify_chains(&records, &report.checkpoints);
            let (notes, bad) = tlog::stored::parse_notes(&report.tree_checkpoints);
            found.entry(String::new()).or_default().extend(bad);
            merge(&mut found, tlog::verify_trees(&records, &notes, None));
            merge(&mut found, ring.note_problems(&notes, ""));
            merge(&mut found, ring.handover_problems(&notes));
            report.chain_problems = chains
                .writers
                .into_iter()
                .flat_map(|w| w.problems)
                .collect();
        }
        if keyed {
            merge(&mut found, findings.of(&report.tree_checkpoints, &records));
            report.chain_problems.extend(found.into_values().flatten());
        }
        return Ok(jsonl_report(target, &report, keyed));
    }
    let store = open_store(target)?;
    let trail = store.read_trail().map_err(|e| e.to_string())?;
    let (recorded, mut found) = recorded_rotations(&trail.records);
    rotations.extend(recorded);
    let mut report = if keys.len() <= 1 && rotations.is_empty() {
        trail.verify(keys.first().copied())
    } else {
        let (notes, _) = tlog::stored::parse_notes(&trail.tree_checkpoints);
        let registered: Vec<String> = trail.writers.iter().map(|w| w.note.clone()).collect();
        let (registrations, _) = tlog::stored::parse_notes(&registered);
        let (checkpoints, store_keys) = (&trail.checkpoints, &keys);
        let by_store = store_key_problems(store_keys, &rotations, &registered, &notes, checkpoints);
        merge(&mut found, by_store);
        let ring = KeyRing::new(&keys, rotations);
        merge(&mut found, trail.tree_problems(None));
        merge(&mut found, ring.note_problems(&notes, ""));
        merge(&mut found, ring.handover_problems(&notes));
        let what = "the writer's registration: ";
        merge(&mut found, ring.note_problems(&registrations, what));
        ring.verify_chains(&trail.records, &trail.checkpoints)
    };
    if keyed {
        merge(
            &mut found,
            findings.of(&trail.tree_checkpoints, &trail.records),
        );
        for (writer, problems) in found {
            match report.writers.iter_mut().find(|w| w.writer == writer) {
                Some(found) => found.problems.extend(problems),
                None => report.writers.push(WriterReport {
                    writer,
                    records: 0,
                    checkpointed: 0,
                    problems,
                    unfinished: Vec::new(),
                }),
            }
        }
        report.writers.sort_by(|a, b| a.writer.cmp(&b.writer));
    }
    let counts = TrailCounts::of(&trail.records, trail.checkpoints.len());
    let rows = (&trail.problems[..], counts);
    Ok(chains_report(&store.describe(), &report, rows, keyed))
}

fn merge(
    into: &mut BTreeMap<String, Vec<ChainProblem>>,
    from: BTreeMap<String, Vec<ChainProblem>>,
) {
    for (writer, problems) in from {
        into.entry(writer).or_default().extend(problems);
    }
}

const NOT_KEYED: &str = "checkpoints not verified: give the signer's public key with --key to \
                         detect a cut-off tail or a recomputed chain";

fn jsonl_report(target: &str, report: &VerifyReport, keyed: bool) -> Verified {
    let problem = report
        .problem
        .as_ref()
        .map(|p| json!({ "line": p.line, "kind": p.kind.code(), "message": p.to_string() }));
    let chain: Vec<String> = report
        .chain_problems
        .iter()
        .map(|p| p.to_string())
        .collect();
    let json = json!({
        "path": target,
        "intact": report.is_intact(),
        "records": report.records,
        "checkpoints": report.checkpoints.len(),
        "checkpoints_verified": keyed,
        "problem": problem,
        "chain_problems": chain,
        "unfinished": report.unfinished,
        "counts": report.counts,
    });
    let mut text = String::new();
    match &report.problem {
        None if report.chain_problems.is_empty() => {
            let hint = match (keyed, report.checkpoints.len()) {
                (true, n) => format!(", {n} signed checkpoints verified"),
                (false, 0) => String::new(),
                (false, _) => format!(" ({NOT_KEYED})"),
            };
            let _ = writeln!(text, "{target}: {}; chain intact{hint}", report.counts);
        }
        None => {}
        Some(problem) => {
            let records = report.records;
            let _ = writeln!(
                text,
                "{target}: {problem} ({records} intact records before it)"
            );
        }
    }
    for problem in &report.chain_problems {
        let _ = writeln!(text, "{target}: {}", escape(&problem.to_string()));
    }
    for call in &report.unfinished {
        let _ = writeln!(text, "{target}: {}", escape(&call.to_string()));
    }
    Verified {
        intact: report.is_intact(),
        text,
        json,
        note: None,
    }
}

fn chains_report(
    describe: &str,
    report: &ChainsReport,
    (rows, counts): (&[RowProblem], TrailCounts),
    keyed: bool,
) -> Verified {
    let intact = report.is_intact() && rows.is_empty();
    let writers: Vec<Value> = report
        .writers
        .iter()
        .map(|w| {
            json!({
                "writer": w.writer,
                "records": w.records,
                "checkpointed": w.checkpointed,
                "problems": w.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                "unfinished": w.unfinished,
            })
        })
        .collect();
    let row_json: Vec<Value> = rows
        .iter()
        .map(|p| {
            json!({
                "writer": p.writer, "seq": p.seq, "column": p.column,
                "found": p.found, "expected": p.expected, "message": p.to_string(),
            })
        })
        .collect();
    let json = json!({
        "store": describe,
        "intact": intact,
        "records": report.records(),
        "checkpoints_verified": keyed,
        "writers": writers,
        "rows": row_json,
        "counts": counts,
    });
    let mut text = String::new();
    for writer in &report.writers {
        let name = escape(if writer.writer.is_empty() {
            "(unnamed writer)"
        } else {
            &writer.writer
        });
        if writer.problems.is_empty() {
            let records = writer.records;
            let checkpointed = match keyed {
                true => format!(", checkpointed to record {}", writer.checkpointed),
                false => String::new(),
            };
            let _ = writeln!(
                text,
                "{describe}: writer {name}: {records} records, chain intact{checkpointed}"
            );
        }
        let said = (writer.problems.iter().map(ToString::to_string))
            .chain(writer.unfinished.iter().map(ToString::to_string));
        for line in said {
            let _ = writeln!(text, "{describe}: writer {name}: {}", escape(&line));
        }
    }
    for row in rows {
        let _ = writeln!(text, "{describe}: {}", escape(&row.to_string()));
    }
    let verdict = if intact {
        "every chain intact"
    } else if report.is_intact() {
        "every chain intact, but rows were edited: NOT intact"
    } else {
        "NOT intact"
    };
    let writers = report.writers.len();
    let _ = writeln!(text, "{describe}: {writers} writers, {counts}; {verdict}");
    Verified {
        intact,
        text,
        json,
        note: (!keyed).then(|| format!("capability: {NOT_KEYED}")),
    }
}

/// What `witness-submit` did, one line per writer and witness; `refused` when a witness gave
/// no cosignature or one could not be stored.
#[derive(Clone, Debug, Default)]
pub struct Submitted {
    /// What happened, one line each.
    pub lines: Vec<String>,
    /// Whether anything was refused.
    pub refused: bool,
}

/// Takes each writer's latest tree checkpoint in the trail `target` to each witness of `urls`
/// (with the consistency proof from the size a witness holds, computed from the trail's
/// records) and stores the cosignatures they answer beside it: in a JSON Lines trail one more
/// tree checkpoint line, the same note with the cosignature lines (once its writer has
/// stopped: its lock), in a database over the stored note. `Err` for a trail it cannot read.
pub fn submit(target: &str, urls: &[String]) -> Result<Submitted, String> {
    let jsonl = target_kind(target) == TargetKind::Jsonl;
    let (records, notes, store) = if jsonl {
        let (records, report) = capability::audit::read_jsonl(target).map_err(|e| e.to_string())?;
        if let Some(problem) = report.problem {
            return Err(format!(
                "{target}: {problem}: only an intact trail is submitted (`capability audit \
                 verify`)"
            ));
        }
        (records, report.tree_checkpoints, None)
    } else {
        let store = open_store(target)?;
        let trail = store.read_trail().map_err(|e| e.to_string())?;
        (trail.records, trail.tree_checkpoints, Some(store))
    };
    let (notes, _) = tlog::stored::parse_notes(&notes);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no async runtime for the witnesses: {e}"))?;
    let mut done = Submitted::default();
    for (writer, mut note) in tlog::witnessed::latest_by_writer(&notes) {
        let tree = tlog::writer_tree(&records, &writer);
        let size = note.head.size;
        let shown = escape(&writer);
        if tree.size() < size || tree.root(size).ok() != Some(note.head.root) {
            done.refused = true;
            done.lines.push(format!(
                "writer {shown}: its records are not the tree of {size} records its latest \
                 checkpoint signs (`capability audit verify`): not submitted"
            ));
            continue;
        }
        let before = note.signatures.len();
        for url in urls {
            match runtime.block_on(capability_http::witness::cosign(url, &note, Some(&tree))) {
                Ok(lines) => {
                    note.add_signatures(lines);
                    done.lines.push(format!(
                        "writer {shown}: the tree of {size} records cosigned by {url}"
                    ));
                }
                Err(e) => {
                    done.refused = true;
                    done.lines
                        .push(format!("writer {shown}: {}", escape(&e.to_string())));
                }
            }
        }
        if note.signatures.len() == before {
            continue;
        }
        let stored = match &store {
            None => tlog::witnessed::append_tree_note(Path::new(target), &note)
                .map(|()| true)
                .map_err(|e| e.to_string()),
            Some(store) => store.store_cosigned(&note).map_err(|e| e.to_string()),
        };
        let why = match stored {
            Ok(true) => continue,
            Ok(false) => "the checkpoint is no longer stored".to_owned(),
            Err(e) => e,
        };
        done.refused = true;
        (done.lines).push(format!(
            "writer {shown}: the cosignatures are not stored: {why}"
        ));
    }
    Ok(done)
}
