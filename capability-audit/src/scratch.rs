//! Per-thread scratch buffers for the text a call's records are made of (canonical JSON to hash
//! or digest), so that the path of every call does not allocate, and free, a kilobyte or more
//! several times: glibc's allocator consolidates its free lists on each such request, and that
//! was a third of an audited call's time.

use std::cell::RefCell;

/// Buffers grown past this are dropped after use rather than kept for the thread's life.
const KEEP_UP_TO: usize = 64 * 1024;

thread_local! {
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
    static BYTES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty string buffer of this thread (a fresh one if the thread's is in use).
pub(crate) fn with_text<R>(f: impl FnOnce(&mut String) -> R) -> R {
    TEXT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let result = f(&mut buffer);
            if buffer.capacity() > KEEP_UP_TO {
                *buffer = String::new();
            }
            result
        }
        Err(_) => f(&mut String::new()),
    })
}

/// Runs `f` with an empty byte buffer of this thread (a fresh one if the thread's is in use).
pub(crate) fn with_bytes<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    BYTES.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let result = f(&mut buffer);
            if buffer.capacity() > KEEP_UP_TO {
                *buffer = Vec::new();
            }
            result
        }
        Err(_) => f(&mut Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_empty_when_lent_and_a_nested_use_gets_its_own() {
        with_text(|outer| {
            outer.push_str("outer");
            let inner = with_text(|inner| {
                assert!(inner.is_empty());
                inner.push_str("inner");
                inner.clone()
            });
            assert_eq!((outer.as_str(), inner.as_str()), ("outer", "inner"));
        });
        with_text(|again| assert!(again.is_empty(), "cleared: {again:?}"));
        with_bytes(|bytes| {
            bytes.resize(KEEP_UP_TO + 1, 0);
        });
        BYTES.with(|cell| assert_eq!(cell.borrow().capacity(), 0, "a big buffer is not kept"));
    }
}
