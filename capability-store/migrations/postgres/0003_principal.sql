-- capability-store schema 3 (PostgreSQL): who called, when an edge authenticated the caller (an
-- OAuth access token, the bearer-token table): `principal` (a token's `sub`, or
-- `token:<hash prefix>`), `client_id` and `issuer` (the token's `client_id` and `iss`). NULL for
-- records of callers no edge authenticated, and for records written before.

ALTER TABLE mcp_audit_log ADD COLUMN principal TEXT;
ALTER TABLE mcp_audit_log ADD COLUMN client_id TEXT;
ALTER TABLE mcp_audit_log ADD COLUMN issuer    TEXT;

CREATE INDEX mcp_audit_log_principal ON mcp_audit_log (principal);
