"""Cosignature vectors made by aics-tlog 0.2.1 (an independent C2SP implementation)."""
import base64, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from aics_tlog.checkpoint import Checkpoint, sign_checkpoint, verify_checkpoint
from aics_tlog.cosign import sign_cosignature, cosignature_vkey
from aics_tlog.note import vkey_from_ed25519, format_vkey, Note, parse_note

log_seed = bytes(range(32))
witness_seed = bytes(range(32, 64))
log = Ed25519PrivateKey.from_private_bytes(log_seed)
witness = Ed25519PrivateKey.from_private_bytes(witness_seed)
root = base64.b64decode("XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=")
out = {"generator": "aics-tlog 0.2.1 (PyPI), cryptography 50.0.2",
       "log_seed": log_seed.hex(), "witness_seed": witness_seed.hex(),
       "witness_name": "witness.example/w1", "cases": []}
for size, ext, time in [(8, (), 1700000000), (8, ("capability/extension example",), 1700000001)]:
    cp = Checkpoint(origin="capability/replica-1", size=size, root=root, extension_lines=ext)
    note = sign_checkpoint(cp, log, "capability/replica-1")
    blob, line = sign_cosignature(witness, "witness.example/w1", time, cp.origin, cp.size, cp.root, list(ext))
    full = Note(text=note.text, signatures=note.signatures + (line,))
    text = full.serialise() if hasattr(full, "serialise") else None
    out["cases"].append({"time": time, "note": text})
wv = cosignature_vkey("witness.example/w1", witness.public_key())
lv = vkey_from_ed25519("capability/replica-1", log.public_key().public_bytes_raw())
out["witness_vkey"] = format_vkey(wv)
out["log_vkey"] = format_vkey(lv)
for case in out["cases"]:
    r = verify_checkpoint(parse_note(case["note"]), lv, [wv], 1)
    assert r.ok if hasattr(r, "ok") else r, r
json.dump(out, sys.stdout, indent=2)
print()
