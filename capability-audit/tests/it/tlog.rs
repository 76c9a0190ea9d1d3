//! `capability_audit::tlog` against published vectors (RFC 6962 as transparency-dev/merkle
//! tests it; the C2SP signed-note example) and against tampering: a cut tail, a rewritten
//! record, a proof for another record, a forked checkpoint, a wrong key, a forged signature.
//!
//! `testdata/tlog/{inclusion,consistency}.json` are transparency-dev/merkle's probes
//! (`testdata/inclusion/**`, `testdata/consistency/**` at commit 417fb0c3, Apache-2.0), each
//! file's JSON object kept as is, with its path added as `file`.

use capability::audit::tlog::encoding::{base64, from_base64};
use capability::audit::tlog::{
    Hash, SignedCheckpoint, TlogError, TlogProof, Tree, TreeHead, check_consistency, check_proof,
    empty_root, key_id, leaf_hash, prove, verifier_key, verify_consistency, verify_inclusion,
};
use capability::audit::{AuditRecord, ChainHead, CheckpointVerifier, GENESIS};
use capability::gate::{PublicKey, SecretKey};
use serde_json::{Value, json};

fn hex_hash(text: &str) -> Hash {
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect();
    Hash::try_from(bytes).expect("32 bytes")
}

/// The leaves of transparency-dev/merkle's `testonly.LeafInputs()` (RFC 6962's test tree).
fn leaf_inputs() -> Vec<Vec<u8>> {
    [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
    ]
    .iter()
    .map(|h| {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    })
    .chain(std::iter::once((0x60..=0x6f).collect()))
    .collect()
}

fn test_tree() -> Tree {
    let leaves = leaf_inputs();
    Tree::from_leaves(leaves.iter().map(Vec::as_slice))
}

#[test]
fn the_roots_of_the_rfc_6962_test_tree_are_the_published_ones() {
    // testonly.RootHashes(): the root at every size from 0 to 8.
    let roots = [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];
    let tree = test_tree();
    assert_eq!(empty_root(), hex_hash(roots[0]));
    for (size, root) in roots.iter().enumerate() {
        assert_eq!(tree.root(size as u64), Ok(hex_hash(root)), "size {size}");
        // A tree built to that size alone has the same root.
        let leaves = leaf_inputs();
        let alone = Tree::from_leaves(leaves[..size].iter().map(Vec::as_slice));
        assert_eq!(
            alone.root(size as u64),
            Ok(hex_hash(root)),
            "size {size} alone"
        );
    }
    assert_eq!(
        tree.leaf(1),
        Some(hex_hash(
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"
        ))
    );
    assert!(tree.root(9).is_err());
}

fn probes(kind: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/testdata/tlog/{kind}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("vectors");
    serde_json::from_str(&text).expect("json")
}

/// A probe's proof, or `None` when a hash in it is not 32 bytes (a garbled proof, which the
/// type of our proofs cannot even hold).
fn hashes(value: &Value) -> Option<Vec<Hash>> {
    let Some(array) = value.as_array() else {
        return Some(Vec::new());
    };
    array
        .iter()
        .map(|h| from_base64(h.as_str()?).and_then(|b| Hash::try_from(b).ok()))
        .collect()
}

/// A probe's hash field. Some probes put other bytes there (`don't care`), which our 32-byte
/// type cannot hold: those stand in as their leaf hash, so that equal values stay equal and
/// differ from every real hash.
fn field(probe: &Value, name: &str) -> Option<Hash> {
    let bytes = from_base64(probe[name].as_str()?)?;
    Some(Hash::try_from(bytes.as_slice()).unwrap_or_else(|_| leaf_hash(&bytes)))
}

#[test]
fn every_transparency_dev_inclusion_probe_gives_the_expected_verdict() {
    let probes = probes("inclusion");
    assert_eq!(probes.len(), 98);
    let tree = test_tree();
    let mut happy = 0;
    for probe in &probes {
        let (index, size) = (
            probe["leafIdx"].as_u64().unwrap(),
            probe["treeSize"].as_u64().unwrap(),
        );
        let proof = hashes(&probe["proof"]);
        // A leaf hash of another length is refused (as Go's `RootFromInclusionProof` does).
        let leaf = field(probe, "leafHash").filter(|_| {
            from_base64(probe["leafHash"].as_str().unwrap_or("")).is_some_and(|b| b.len() == 32)
        });
        let verdict = match (leaf, field(probe, "root"), &proof) {
            (Some(leaf), Some(root), Some(proof)) => {
                verify_inclusion(index, size, &leaf, proof, &root)
            }
            _ => Err(TlogError::Malformed("not a hash".into())),
        };
        let want_error = probe["wantErr"].as_bool().unwrap();
        assert_eq!(
            verdict.is_err(),
            want_error,
            "{}: {verdict:?}",
            probe["file"]
        );
        if !want_error {
            happy += 1;
            // Our tree makes the very same proof.
            assert_eq!(
                tree.inclusion_proof(index, size).ok(),
                proof,
                "{}",
                probe["file"]
            );
        }
    }
    assert_eq!(happy, 6);
}

#[test]
fn every_transparency_dev_consistency_probe_gives_the_expected_verdict() {
    let probes = probes("consistency");
    assert_eq!(probes.len(), 98);
    let tree = test_tree();
    let mut happy = 0;
    for probe in &probes {
        let (old, new) = (
            probe["size1"].as_u64().unwrap(),
            probe["size2"].as_u64().unwrap(),
        );
        let proof = hashes(&probe["proof"]);
        let verdict = match (field(probe, "root1"), field(probe, "root2"), &proof) {
            (Some(r1), Some(r2), Some(proof)) => verify_consistency(old, new, &r1, &r2, proof),
            _ => Err(TlogError::Malformed("not a hash".into())),
        };
        let want_error = probe["wantErr"].as_bool().unwrap();
        assert_eq!(
            verdict.is_err(),
            want_error,
            "{}: {verdict:?}",
            probe["file"]
        );
        if !want_error && new <= 8 {
            happy += 1;
            assert_eq!(
                tree.consistency_proof(old, new).ok(),
                proof,
                "{}",
                probe["file"]
            );
        }
    }
    assert!(happy >= 5, "{happy}");
}

#[test]
fn every_proof_of_every_small_tree_verifies_and_no_altered_one_does() {
    let leaves: Vec<Vec<u8>> = (0..70u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let tree = Tree::from_leaves(leaves.iter().map(Vec::as_slice));
    for size in 1..=70u64 {
        let root = tree.root(size).unwrap();
        for index in 0..size {
            let proof = tree.inclusion_proof(index, size).unwrap();
            let leaf = leaf_hash(&leaves[index as usize]);
            assert_eq!(verify_inclusion(index, size, &leaf, &proof, &root), Ok(()));
            let other = leaf_hash(b"another");
            assert_eq!(
                verify_inclusion(index, size, &other, &proof, &root),
                Err(TlogError::NotIncluded { index, size })
            );
        }
        for old in 1..=size {
            let proof = tree.consistency_proof(old, size).unwrap();
            let old_root = tree.root(old).unwrap();
            assert_eq!(
                verify_consistency(old, size, &old_root, &root, &proof),
                Ok(())
            );
            if old < size {
                let mut forged = proof.clone();
                forged[0][0] ^= 1;
                assert!(verify_consistency(old, size, &old_root, &root, &forged).is_err());
                let other = leaf_hash(b"rewritten");
                assert!(verify_consistency(old, size, &other, &root, &proof).is_err());
            }
        }
    }
}

#[test]
fn the_key_id_and_signature_of_the_c2sp_signed_note_example_check_out() {
    // c2sp.org/signed-note, "Verifier keys", its example.
    let vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
    let material = from_base64(vkey.rsplit('+').next().unwrap()).unwrap();
    assert_eq!(material[0], 0x01, "Ed25519");
    let public: [u8; 32] = material[1..].try_into().unwrap();
    assert_eq!(key_id("example.com/foo", &public), [0x53, 0x0d, 0x90, 0x3a]);
    assert_eq!(verifier_key("example.com/foo", &public), vkey);
    let signature = from_base64(
        "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=",
    )
    .unwrap();
    assert_eq!(signature[..4], [0x53, 0x0d, 0x90, 0x3a]);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let key = PublicKey::from_text(&hex(&public)).expect("key");
    let text = b"This is an example message.\n";
    assert!(key.verify_checkpoint(text, &hex(&signature[4..])));
    assert!(!key.verify_checkpoint(b"This is another message.\n", &hex(&signature[4..])));
}

fn head(size: u64, root: Hash) -> TreeHead {
    TreeHead {
        origin: "capability/replica-1".into(),
        size,
        root,
    }
}

#[test]
fn a_checkpoint_is_a_signed_note_that_round_trips_and_names_what_is_wrong() {
    let key = SecretKey::generate().unwrap();
    let signed = head(8, test_tree().root(8).unwrap()).sign(&key).unwrap();
    let text = signed.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "capability/replica-1",
            "8",
            "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
            ""
        ]
    );
    assert!(
        lines[4].starts_with("\u{2014} capability/replica-1 "),
        "{text}"
    );
    assert_eq!(
        from_base64(lines[4].rsplit(' ').next().unwrap())
            .unwrap()
            .len(),
        68
    );
    assert_eq!(SignedCheckpoint::parse(&text), Ok(signed.clone()));
    assert_eq!(
        signed.verify("capability/replica-1", &key.public_key()),
        Ok(())
    );

    let other = SecretKey::generate().unwrap();
    let wrong = signed
        .verify("capability/replica-1", &other.public_key())
        .unwrap_err();
    assert!(matches!(wrong, TlogError::WrongKey { .. }));
    assert!(wrong.to_string().starts_with("wrong key: "), "{wrong}");

    // The body altered under the key's signature: a forgery.
    let forged = text.replacen("\n8\n", "\n9\n", 1);
    let forged = SignedCheckpoint::parse(&forged).unwrap();
    let error = forged
        .verify("capability/replica-1", &key.public_key())
        .unwrap_err();
    assert_eq!(
        error,
        TlogError::BadSignature {
            name: "capability/replica-1".into()
        }
    );
    assert!(
        error.to_string().starts_with("forged signature: "),
        "{error}"
    );

    for bad in [
        text.replace("\n8\n", "\n08\n"),
        text.replace('\u{2014}', "-"),
        text.trim_end().to_owned(),
        text.replace("\n\n", "\n"),
        text.replace("XcnaeacG", "XcnaeacG\t"),
        text.replace("\n8\n", "\n8\r\n"),
    ] {
        assert!(
            matches!(SignedCheckpoint::parse(&bad), Err(TlogError::Malformed(_))),
            "{bad}"
        );
    }
}

fn record(tool: &str) -> AuditRecord {
    serde_json::from_value(json!({
        "seq": 0, "time": "2026-12-05T00:00:00.000Z", "agent": "a", "role": "r", "session": "s",
        "step": null, "provider": null, "tool": tool, "descriptor_hash": "",
        "policy_version": null, "verdict": "denied", "reasons": [], "input": null,
        "input_digest": "", "input_size": 0, "output_digest": null, "output_size": null,
        "latency_us": null, "success": null, "error": null, "prev": "", "hash": ""
    }))
    .expect("a record")
}

fn chain(tools: &[&str]) -> Vec<AuditRecord> {
    let mut head = ChainHead::new("replica-1", 0, GENESIS);
    tools
        .iter()
        .map(|tool| {
            let sealed = head.seal(record(tool));
            head.commit();
            sealed
        })
        .collect()
}

const TOOLS: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

#[test]
fn a_proof_checks_alone_and_refuses_another_record() {
    let key = SecretKey::generate().unwrap();
    let records = chain(&TOOLS);
    let proof = prove(&records, "replica-1", 3, &key).unwrap();
    assert_eq!((proof.index, proof.checkpoint.head.size), (2, 7));
    let text = proof.to_text();
    assert!(text.starts_with("c2sp.org/tlog-proof@v1\nextra "), "{text}");
    let parsed = TlogProof::parse(&text).unwrap();
    assert_eq!(parsed, proof);
    let line = records[2].to_line();
    let proven = check_proof(&parsed, &key.public_key(), Some(&line)).unwrap();
    assert_eq!(
        (proven.writer.as_str(), proven.seq, proven.size),
        ("replica-1", 3, 7)
    );
    assert_eq!(check_proof(&parsed, &key.public_key(), None), Ok(proven));

    // Another record given for this proof: said so, naming the proof's record.
    let other = records[4].to_line();
    let error = check_proof(&parsed, &key.public_key(), Some(&other)).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("another record (writer \"replica-1\" record 3)"),
        "{error}"
    );

    // The proof's record swapped for another (extra line replaced): not included.
    let mut swapped = parsed.clone();
    swapped.extra = Some(other.clone().into_bytes());
    let error = check_proof(&swapped, &key.public_key(), Some(&other)).unwrap_err();
    assert_eq!(error, TlogError::NotIncluded { index: 2, size: 7 });

    // The record rewritten (same seq, other content): not included.
    let mut rewritten = records[2].clone();
    rewritten.tool = "rm -rf".into();
    rewritten.hash = rewritten.compute_hash();
    let mut forged = parsed.clone();
    forged.extra = Some(rewritten.to_line().into_bytes());
    assert!(matches!(
        check_proof(&forged, &key.public_key(), None),
        Err(TlogError::NotIncluded { .. })
    ));

    // Another key: wrong key, before anything else.
    let other_key = SecretKey::generate().unwrap();
    assert!(matches!(
        check_proof(&parsed, &other_key.public_key(), None),
        Err(TlogError::WrongKey { .. })
    ));
    // A proof cut short.
    let mut cut = parsed.clone();
    cut.proof.pop();
    assert!(matches!(
        check_proof(&cut, &key.public_key(), None),
        Err(TlogError::ProofSize { .. })
    ));
}

#[test]
fn consistency_shows_growth_and_names_a_cut_a_rewrite_and_a_fork() {
    let key = SecretKey::generate().unwrap();
    let public = key.public_key();
    let records = chain(&TOOLS);
    let at = |records: &[AuditRecord], n: usize| {
        let tree = Tree::from_leaves(
            records[..n]
                .iter()
                .map(|r| r.to_line())
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_bytes),
        );
        head(n as u64, tree.root(n as u64).unwrap())
            .sign(&key)
            .unwrap()
    };
    let old = at(&records, 4);
    let new = at(&records, 7);
    let proof = check_consistency(&old, &new, &records, Some(&public)).unwrap();
    assert_eq!(
        verify_consistency(4, 7, &old.head.root, &new.head.root, &proof),
        Ok(())
    );
    assert_eq!(
        check_consistency(&old, &old, &records, Some(&public)),
        Ok(vec![])
    );

    // The tail cut: the trail is shorter than the newer checkpoint, or the newer tree is.
    let error = check_consistency(&old, &new, &records[..5], Some(&public)).unwrap_err();
    assert!(
        error.to_string().contains("records were cut off"),
        "{error}"
    );
    let error = check_consistency(&new, &old, &records, Some(&public)).unwrap_err();
    assert_eq!(
        error,
        TlogError::Shrunk {
            old_size: 7,
            new_size: 4
        }
    );

    // Record 2 rewritten, its chain computed again, and signed again: the rewritten tree does
    // not extend the old checkpoint.
    let rewritten = chain(&["a", "B", "c", "d", "e", "f", "g"]);
    let resigned = at(&rewritten, 7);
    let error = check_consistency(&old, &resigned, &rewritten, Some(&public)).unwrap_err();
    assert_eq!(
        error,
        TlogError::NotConsistent {
            old_size: 4,
            new_size: 7
        }
    );
    assert!(error.to_string().contains("were rewritten"), "{error}");
    // And against the original checkpoint, the rewritten trail is not its tree.
    let error = check_consistency(&old, &new, &rewritten, Some(&public)).unwrap_err();
    assert!(
        error.to_string().contains("rewritten since it was signed"),
        "{error}"
    );

    // A fork: two roots signed for one size.
    let forked = at(&rewritten, 4);
    let error = check_consistency(&old, &forked, &records, Some(&public)).unwrap_err();
    assert_eq!(error, TlogError::Fork { size: 4 });
    assert!(error.to_string().starts_with("fork: "), "{error}");

    // A checkpoint of another key.
    let stranger = SecretKey::generate().unwrap();
    let error = check_consistency(&old, &new, &records, Some(&stranger.public_key())).unwrap_err();
    assert!(matches!(error, TlogError::WrongKey { .. }));
}

#[test]
fn base64_is_standard_with_padding() {
    assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
}

#[test]
fn the_proof_of_a_lone_record_has_no_hashes_and_still_checks() {
    let key = SecretKey::generate().unwrap();
    let records = chain(&["only"]);
    let proof = prove(&records, "replica-1", 1, &key).unwrap();
    assert!(proof.proof.is_empty());
    let text = proof.to_text();
    assert!(
        text.contains("\nindex 0\n\ncapability/replica-1\n1\n"),
        "{text}"
    );
    let parsed = TlogProof::parse(&text).unwrap();
    let proven = check_proof(&parsed, &key.public_key(), None).unwrap();
    assert_eq!(
        proven.to_string(),
        format!(
            "writer replica-1 record 1 is in the tree of 1 records (root {}) signed by the key",
            base64(&leaf_hash(records[0].to_line().as_bytes()))
        )
    );
    assert_eq!(
        capability::audit::tlog::parse_record_ref("host:a:7"),
        Ok(("host:a", 7))
    );
    assert!(capability::audit::tlog::parse_record_ref("replica-1").is_err());
}
