"""Checks capability's C2SP tlog proofs and checkpoints with code nobody here wrote.

The Merkle tree is pymerkle's (RFC 6962 hashing: 0x00 before a leaf, 0x01 before a node): the
root at each checkpoint's size is computed from the trail's lines, and each inclusion proof is
verified by pymerkle's verifier. The Ed25519 signature is verified by `cryptography`. Only the
parsing of the text formats (c2sp.org/tlog-proof, signed-note) is written here, after the specs.

usage: tlog_check.py <trail.jsonl> <public key, 64 hex digits> <proof file>...
Prints one JSON object per proof file.
"""

import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pymerkle import InclusionProof, InmemoryTree, InvalidProof, verify_inclusion


def b64(text):
    return base64.b64decode(text, validate=True)


def check(tree, public, path):
    text = open(path, encoding="utf-8").read()
    head, note = text.split("\n\n", 1)
    lines = head.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1", lines[0]
    at, extra = 1, None
    if lines[at].startswith("extra "):
        extra = b64(lines[at][len("extra "):])
        at += 1
    assert lines[at].startswith("index "), lines[at]
    index = int(lines[at][len("index "):])
    hashes = [b64(h) for h in lines[at + 1:]]

    # signed-note: the text up to the last blank line, then the signature lines.
    split = note.rindex("\n\n")
    body, signatures = note[: split + 1], note[split + 2:]
    origin, size, root = body.split("\n")[:3]
    size, root = int(size), b64(root)
    result = {"file": path, "origin": origin, "size": size, "index": index}
    result["root_matches_pymerkle"] = tree.get_root(size) == root

    leaf = hashlib.sha256(b"\x00" + extra).digest()
    own = tree.prove_inclusion(index + 1, size)  # pymerkle counts leaves from 1
    result["same_path_as_pymerkle"] = own.path[1:] == hashes
    ours = InclusionProof("sha256", True, size, index + 1, own.rule, [leaf] + hashes)
    try:
        verify_inclusion(leaf, root, ours)
        result["inclusion"] = "ok"
    except InvalidProof as e:
        result["inclusion"] = str(e)

    result["signature"] = "no signature of the key"
    key = Ed25519PublicKey.from_public_bytes(public)
    for line in signatures.rstrip("\n").split("\n"):
        assert line.startswith("\u2014 "), line
        name, signature = line[2:].split(" ")
        signature = b64(signature)
        key_id = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
        if name != origin or signature[:4] != key_id:
            continue
        try:
            key.verify(signature[4:], body.encode())
            result["signature"] = "ok"
        except InvalidSignature:
            result["signature"] = "invalid"
    return result


def main():
    trail, key_hex, *proofs = sys.argv[1:]
    public = bytes.fromhex(key_hex.strip())
    tree = InmemoryTree(algorithm="sha256")
    for line in open(trail, "rb").read().split(b"\n"):
        if line and not line.startswith(b'{"checkpoint":'):
            tree.append_entry(line)
    for path in proofs:
        print(json.dumps(check(tree, public, path)))


if __name__ == "__main__":
    main()
