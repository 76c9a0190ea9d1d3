//! What can be wrong with a writer's chain, its tree and its registration, as `verify_chains`
//! and the checks of `tlog` report it: one [`ChainProblem`] per finding, each said plainly.

use std::fmt;

/// Something wrong with one writer's chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainProblem {
    /// The record's hash does not match its content: it was edited.
    Edited {
        /// Its `seq`.
        seq: u64,
    },
    /// The record does not follow the previous one: one was removed, inserted or moved.
    ChainBroken {
        /// The `seq` expected.
        expected_seq: u64,
        /// The `seq` found.
        found_seq: u64,
    },
    /// A signed checkpoint names record `checkpoint_seq`, but the chain ends at `last_seq`:
    /// records were cut off its end.
    TailCut {
        /// The checkpoint's `seq`.
        checkpoint_seq: u64,
        /// The last record present.
        last_seq: u64,
    },
    /// The record at a signed checkpoint's `seq` has another hash than the one signed: the
    /// chain was edited and its hashes computed again.
    Recomputed {
        /// The checkpoint's `seq`.
        seq: u64,
    },
    /// A checkpoint's signature is not the key's (forged, or signed by another key).
    BadCheckpoint {
        /// The `seq` it claims.
        seq: u64,
    },
    /// A key was given but no valid checkpoint vouches for this writer's chain.
    Unvouched,
    /// A stored tree checkpoint signs a tree of `size` records, and the writer has `records`:
    /// records were cut off (`tlog::verify_trees`).
    TreeCut {
        /// The signed tree's size.
        size: u64,
        /// The writer's records present.
        records: u64,
    },
    /// The writer's first `size` records do not hash to the root a stored tree checkpoint signs:
    /// one of them was rewritten (even with the chain's hashes computed again).
    TreeRewritten {
        /// The signed tree's size.
        size: u64,
    },
    /// A stored tree checkpoint that does not parse, or is not signed by the given key.
    BadTreeCheckpoint {
        /// The size it claims (0 when it cannot be read).
        size: u64,
        /// Why.
        why: String,
    },
    /// A writer registered in the store has no records and no checkpoint left: they were all
    /// deleted.
    WriterGone {
        /// The writer.
        writer: String,
        /// When it registered (its registration's `time`).
        registered_at: String,
    },
    /// No signed checkpoint of the writer between `from` and `to`, longer than its sink lets
    /// pass even when idle: records (and their checkpoints) were cut from that span, or the
    /// writer was killed without signing its `stopped` checkpoint (`tlog::checkpoint_gaps`).
    CheckpointGap {
        /// The writer.
        writer: String,
        /// The size of the tree the last checkpoint before the gap signs: the records after it
        /// are the ones no checkpoint covers in time.
        after: u64,
        /// The last checkpoint before the gap (its time).
        from: String,
        /// The next one, or the time of the verification.
        to: String,
        /// The gap, in seconds.
        seconds: u64,
        /// The interval the writer signs at, in seconds.
        every: u64,
    },
    /// Records `from..=to` of a writer that no checkpoint covers, more than its sink lets pass
    /// (`tlog::gaps::uncovered_records`): its checkpoints over them were deleted, or they were
    /// appended by someone without its key.
    UncoveredRecords {
        /// The writer.
        writer: String,
        /// The first record of the span.
        from: u64,
        /// The last.
        to: u64,
        /// The writer signs a checkpoint at least every this many records.
        every: u64,
    },
    /// The writer's latest tree checkpoint lacks the cosignatures a verifier requires
    /// (`tlog::witnessed::unwitnessed`): why, naming the witnesses missing.
    Unwitnessed {
        /// The size of the tree that checkpoint signs.
        size: u64,
        /// Why (the quorum's message).
        why: String,
    },
    /// A key rotation recorded in the trail that cannot be read, or a checkpoint signed by a
    /// key outside the span its rotations give it (`tlog::keys`).
    Rotation {
        /// Why.
        why: String,
    },
    /// The writer's registration names one before it that is no longer in the store: a
    /// writer's registration was deleted, with its records (`tlog::writers`).
    RegistrationGone {
        /// The writer whose registration names the one gone.
        writer: String,
    },
    /// A writer's tree checkpoint names the store's latest registration as the writer signed
    /// it, and the store no longer holds that registration, or holds fewer registrations than
    /// the checkpoint counts: a registered writer was removed with its registration, even the
    /// latest one (`tlog::writers`).
    RegistrationRemoved {
        /// The writer whose checkpoint names it.
        writer: String,
        /// The size of the tree that checkpoint signs.
        size: u64,
        /// When that checkpoint was signed (its `time` line).
        time: String,
        /// The registrations the store held as it was signed.
        counted: u64,
        /// The registrations the store holds now.
        present: u64,
        /// Whether the registration it names as the latest is gone (else only fewer are left
        /// than it counted).
        latest_gone: bool,
    },
}

impl fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainProblem::Edited { seq } => write!(
                f,
                "record {seq} was edited: its hash does not match its content"
            ),
            ChainProblem::ChainBroken {
                expected_seq,
                found_seq,
            } => write!(
                f,
                "the chain is broken: expected record {expected_seq}, found record {found_seq} \
                 (a record was removed, inserted or moved)"
            ),
            ChainProblem::TailCut {
                checkpoint_seq,
                last_seq,
            } => write!(
                f,
                "tail cut off: a signed checkpoint vouches for record {checkpoint_seq}, but the \
                 chain ends at record {last_seq}"
            ),
            ChainProblem::Recomputed { seq } => write!(
                f,
                "chain recomputed: record {seq} does not have the hash a signed checkpoint \
                 vouches for (records were edited and their hashes computed again)"
            ),
            ChainProblem::BadCheckpoint { seq } => write!(
                f,
                "the checkpoint at record {seq} is not signed by the given key"
            ),
            ChainProblem::Unvouched => f.write_str(
                "no checkpoint signed by the given key vouches for this chain: it could have \
                 been rewritten whole",
            ),
            ChainProblem::TreeCut { size, records } => write!(
                f,
                "tail cut off: a signed tree checkpoint covers {size} records, and the writer \
                 has {records}"
            ),
            ChainProblem::TreeRewritten { size } => write!(
                f,
                "record rewritten: the first {size} records do not hash to the root the signed \
                 tree checkpoint of size {size} holds"
            ),
            ChainProblem::BadTreeCheckpoint { size, why } => {
                write!(f, "the tree checkpoint of size {size} is refused: {why}")
            }
            ChainProblem::WriterGone {
                writer,
                registered_at,
            } => write!(
                f,
                "removed writer: writer {writer:?} registered at {registered_at} has no records \
                 and no checkpoint left (they were deleted)"
            ),
            ChainProblem::CheckpointGap {
                writer,
                after,
                from,
                to,
                seconds,
                every,
            } => write!(
                f,
                "missing checkpoints: writer {writer:?} signed none after its record {after} \
                 from {from} to {to} ({seconds} s, where it signs one at least every {every} s, \
                 idle or not): its records after {after} were cut with their checkpoints, or \
                 the writer was killed"
            ),
            ChainProblem::Unwitnessed { size, why } => write!(
                f,
                "not witnessed: the latest tree checkpoint (the tree of {size} records) has too \
                 few cosignatures: {why}"
            ),
            ChainProblem::Rotation { why } => write!(f, "key rotation: {why}"),
            ChainProblem::UncoveredRecords {
                writer,
                from,
                to,
                every,
            } => write!(
                f,
                "records without a checkpoint: no signed tree checkpoint of writer {writer:?} \
                 covers its records {from} to {to}, where it signs one at least every {every} \
                 records: their checkpoints were deleted, or the records were appended by \
                 someone without its key"
            ),
            ChainProblem::RegistrationGone { writer } => write!(
                f,
                "removed registration: the registration of writer {writer:?} names one before \
                 it that is no longer in the store (a writer's registration was deleted, with \
                 its records)"
            ),
            ChainProblem::RegistrationRemoved {
                writer,
                size,
                time,
                counted,
                present,
                latest_gone,
            } => {
                write!(
                    f,
                    "removed writer: the tree checkpoint of size {size} that writer {writer:?} \
                     signed at {time} "
                )?;
                if *latest_gone {
                    write!(
                        f,
                        "names the store's latest registration as it signed (of {counted}), and \
                         the store no longer holds it"
                    )?;
                } else {
                    write!(
                        f,
                        "counts {counted} registrations in the store, and {present} are left"
                    )?;
                }
                f.write_str(
                    ": a registered writer was deleted with its records, its checkpoints and \
                     its registration",
                )
            }
        }
    }
}
