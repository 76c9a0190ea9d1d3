// Mints a JWT with the private keys of an `auth-server.mjs` run (its `keys` file): a token the
// issuer's own key signs, with whatever header and claims a test gives. For the resource server's
// tests of what a real issuer may sign besides access tokens (an ID token typed `JWT`, a token
// without `sub`).
//
//   node mint-jwt.mjs <private-jwks.json> '<header JSON>' '<claims JSON>'
//
// The header's `alg` picks the key (its `kid` is added); the claims are signed as given.
// Stdout: the token and a newline.
import { readFileSync } from 'node:fs';

import { SignJWT, importJWK } from 'jose';

const [keysPath, headerText, claimsText] = process.argv.slice(2);
if (!keysPath || !headerText || !claimsText) {
  process.stderr.write('usage: node mint-jwt.mjs <private-jwks.json> <header JSON> <claims JSON>\n');
  process.exit(2);
}
const header = JSON.parse(headerText);
const claims = JSON.parse(claimsText);
const { keys } = JSON.parse(readFileSync(keysPath, 'utf8'));
const key = keys.find((k) => k.alg === header.alg);
if (!key) {
  process.stderr.write(`no key for alg ${header.alg}\n`);
  process.exit(1);
}
const token = await new SignJWT(claims)
  .setProtectedHeader({ ...header, kid: key.kid })
  .sign(await importJWK(key, key.alg));
process.stdout.write(`${token}\n`);
