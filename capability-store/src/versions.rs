//! The SQL of `mcp_tool_versions`. Times are Unix seconds at the API; PostgreSQL keeps
//! `TIMESTAMPTZ`, SQLite RFC 3339 UTC text (as the log's times), so each has its own text.

/// PostgreSQL: a tool seen at `$4`; pinned by `$5` (NULL: only seen).
#[cfg(feature = "postgres")]
pub(crate) const PG_SEEN: &str = "INSERT INTO mcp_tool_versions
    (server, tool, descriptor_hash, first_seen, last_seen, pinned_by, pinned_at)
    VALUES ($1, $2, $3, to_timestamp($4::bigint), to_timestamp($4::bigint), $5::text,
            CASE WHEN $5::text IS NULL THEN NULL ELSE to_timestamp($4::bigint) END)
    ON CONFLICT (server, tool, descriptor_hash) DO UPDATE SET
        last_seen = GREATEST(mcp_tool_versions.last_seen, excluded.last_seen),
        pinned_by = COALESCE(excluded.pinned_by, mcp_tool_versions.pinned_by),
        pinned_at = COALESCE(excluded.pinned_at, mcp_tool_versions.pinned_at)";

/// PostgreSQL: the rows, of server `$1` and tool `$2` when not NULL.
#[cfg(feature = "postgres")]
pub(crate) const PG_READ: &str = "SELECT server, tool, descriptor_hash,
    extract(epoch FROM first_seen)::bigint, extract(epoch FROM last_seen)::bigint,
    pinned_by, extract(epoch FROM pinned_at)::bigint
    FROM mcp_tool_versions
    WHERE ($1::text IS NULL OR server = $1) AND ($2::text IS NULL OR tool = $2)
    ORDER BY server, tool, first_seen, descriptor_hash";

/// SQLite: a tool seen at `?4`; pinned by `?5` (NULL: only seen).
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE_SEEN: &str = "INSERT INTO mcp_tool_versions
    (server, tool, descriptor_hash, first_seen, last_seen, pinned_by, pinned_at)
    VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%SZ', ?4, 'unixepoch'),
            strftime('%Y-%m-%dT%H:%M:%SZ', ?4, 'unixepoch'), ?5,
            CASE WHEN ?5 IS NULL THEN NULL
                 ELSE strftime('%Y-%m-%dT%H:%M:%SZ', ?4, 'unixepoch') END)
    ON CONFLICT (server, tool, descriptor_hash) DO UPDATE SET
        last_seen = MAX(last_seen, excluded.last_seen),
        pinned_by = COALESCE(excluded.pinned_by, pinned_by),
        pinned_at = COALESCE(excluded.pinned_at, pinned_at)";

/// SQLite: the rows, of server `?1` and tool `?2` when not NULL.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE_READ: &str = "SELECT server, tool, descriptor_hash,
    CAST(strftime('%s', first_seen) AS INTEGER), CAST(strftime('%s', last_seen) AS INTEGER),
    pinned_by, CAST(strftime('%s', pinned_at) AS INTEGER)
    FROM mcp_tool_versions
    WHERE (?1 IS NULL OR server = ?1) AND (?2 IS NULL OR tool = ?2)
    ORDER BY server, tool, first_seen, descriptor_hash";
