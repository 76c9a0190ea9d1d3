//! Reading and verifying a JSON Lines trail.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::*;

/// What [`verify_jsonl`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Intact records before the first problem (all of them when there is none).
    pub records: u64,
    /// The hash of the last intact record.
    pub last_hash: String,
    /// The first problem, if any.
    pub problem: Option<TrailProblem>,
}

/// The first broken place of a trail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrailProblem {
    /// The line (from 1).
    pub line: u64,
    /// What is wrong with it.
    pub kind: ProblemKind,
}

/// How a trail is broken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The last line is incomplete: a write was cut short (a crash). Every record before it is
    /// intact.
    TornTail,
    /// The line is not an audit record.
    Malformed(String),
    /// The record's hash does not match its content: it was edited.
    Edited,
    /// The record does not follow the previous one: a record was removed, inserted or moved.
    ChainBroken {
        /// The `seq` the line should have.
        expected_seq: u64,
        /// The `seq` it has.
        found_seq: u64,
    },
}

impl fmt::Display for TrailProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProblemKind::TornTail => write!(
                f,
                "line {}: torn tail: the last record was cut short while being written; every \
                 record before it is intact",
                self.line
            ),
            ProblemKind::Malformed(why) => {
                write!(f, "line {}: not an audit record: {why}", self.line)
            }
            ProblemKind::Edited => write!(
                f,
                "line {}: the record was edited: its hash does not match its content",
                self.line
            ),
            ProblemKind::ChainBroken {
                expected_seq,
                found_seq,
            } => write!(
                f,
                "line {}: the chain is broken: expected record {expected_seq} after the previous \
                 one, found record {found_seq} (a record was removed, inserted or moved)",
                self.line
            ),
        }
    }
}

/// Checks a JSON Lines trail: every record's hash, and the chain from each to the next. Stops
/// at the first problem and says where.
pub fn verify_jsonl(path: impl AsRef<Path>) -> Result<VerifyReport, AuditError> {
    let path = path.as_ref();
    let io = |e: std::io::Error| AuditError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = File::open(path).map_err(io)?;
    let mut reader = BufReader::new(file);
    let mut records = 0u64;
    let mut last_hash = GENESIS.to_owned();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io)?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.last() == Some(&b'\n');
        let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned();
        let problem = |kind| {
            Ok(VerifyReport {
                records,
                last_hash: last_hash.clone(),
                problem: Some(TrailProblem { line: number, kind }),
            })
        };
        let record: AuditRecord = match serde_json::from_str(&text) {
            Ok(record) => record,
            Err(_) if !complete => return problem(ProblemKind::TornTail),
            Err(error) => return problem(ProblemKind::Malformed(error.to_string())),
        };
        if !complete {
            return problem(ProblemKind::TornTail);
        }
        if record.hash != record.compute_hash() {
            return problem(ProblemKind::Edited);
        }
        if record.seq != records + 1 || record.prev != last_hash {
            return problem(ProblemKind::ChainBroken {
                expected_seq: records + 1,
                found_seq: record.seq,
            });
        }
        records += 1;
        last_hash = record.hash;
    }
    Ok(VerifyReport {
        records,
        last_hash,
        problem: None,
    })
}

/// Reads every intact record of a trail (stopping at the first problem).
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<(Vec<AuditRecord>, VerifyReport), AuditError> {
    let path = path.as_ref();
    let report = verify_jsonl(path)?;
    let text = std::fs::read_to_string(path).map_err(|e| AuditError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let records = text
        .lines()
        .take(report.records as usize)
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    Ok((records, report))
}
