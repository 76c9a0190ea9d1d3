//! What a target names: a JSON Lines trail, a SQLite file or a PostgreSQL URL.

/// What a target names: a JSON Lines file, a SQLite database or a PostgreSQL database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A JSON Lines trail (`.jsonl`, `.ndjson`, or an existing file that is not SQLite).
    Jsonl,
    /// A SQLite database file (an existing SQLite file, an empty one named as a database, or
    /// any other new path).
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
}

/// The kind of store `target` names, as the command line reads it: `postgres://` and
/// `postgresql://` URLs are PostgreSQL; an existing file starting with SQLite's header is
/// SQLite, and so is an empty file named `.db`, `.db3`, `.sqlite` or `.sqlite3`; a path ending
/// in `.jsonl` or `.ndjson`, or another existing file that is not SQLite, is a JSON Lines
/// trail; any other path is a (new) SQLite database.
pub fn target_kind(target: &str) -> TargetKind {
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        return TargetKind::Postgres;
    }
    let path = std::path::Path::new(target);
    if is_open_sqlite(path) {
        return TargetKind::Sqlite;
    }
    let mut header = [0u8; 16];
    let sqlite = std::fs::File::open(path)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut header))
        .is_ok()
        && &header == b"SQLite format 3\0";
    if sqlite {
        return TargetKind::Sqlite;
    }
    // An empty file is an empty SQLite database to SQLite: one named as a database (made with
    // `touch state.db`, say) is one, not a JSON Lines trail.
    let empty = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0);
    if empty && sqlite_name(path) {
        return TargetKind::Sqlite;
    }
    let jsonl_name = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson"));
    // A character device (`/dev/full`, `/dev/null`) takes lines as a file does.
    #[cfg(unix)]
    let device = {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
    };
    #[cfg(not(unix))]
    let device = false;
    if jsonl_name || path.is_file() || device {
        TargetKind::Jsonl
    } else {
        TargetKind::Sqlite
    }
}

/// Whether `path` ends as a SQLite database's name does: `.db`, `.db3`, `.sqlite` or
/// `.sqlite3`.
fn sqlite_name(path: &std::path::Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["db", "db3", "sqlite", "sqlite3"]
            .iter()
            .any(|x| e.eq_ignore_ascii_case(x))
    })
}

/// The SQLite files this process has connections to (canonical paths). Reading such a file's
/// header to tell its kind would open and close it, and closing any descriptor of a file drops
/// every POSIX lock the process holds on it, SQLite's included: another process could then
/// take this one's WAL for unused and delete it. So a file this process opened is known
/// without being opened again.
static OPEN_SQLITE: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remembers that this process opened `path` as SQLite.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn opened_sqlite(path: &std::path::Path) {
    let Ok(path) = std::fs::canonicalize(path) else {
        return;
    };
    let mut open = OPEN_SQLITE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !open.contains(&path) {
        open.push(path);
    }
}

fn is_open_sqlite(path: &std::path::Path) -> bool {
    let Ok(path) = std::fs::canonicalize(path) else {
        return false;
    };
    OPEN_SQLITE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_a_database_when_named_as_one_and_a_trail_otherwise() {
        let dir = std::env::temp_dir().join(format!("capability-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let kind = |name: &str, content: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, content).expect("write");
            target_kind(&path.display().to_string())
        };
        for name in ["state.db", "state.DB", "a.db3", "a.sqlite", "a.sqlite3"] {
            assert_eq!(kind(name, b""), TargetKind::Sqlite, "{name}");
        }
        for name in ["audit.jsonl", "audit.ndjson", "audit.log", "audit"] {
            assert_eq!(kind(name, b""), TargetKind::Jsonl, "{name}");
        }
        // Not empty and not SQLite: what was written there is a trail's, whatever the name.
        assert_eq!(kind("written.db", b"{}\n"), TargetKind::Jsonl);
        assert_eq!(
            kind("header.jsonl", b"SQLite format 3\0"),
            TargetKind::Sqlite
        );
        let new = dir.join("new.jsonl.d").join("state.db");
        assert_eq!(target_kind(&new.display().to_string()), TargetKind::Sqlite);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
