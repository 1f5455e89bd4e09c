//! Binary file framing (magic, checksum) and atomic writes, shared by data
//! sets, model files and checkpoints.

use std::io::Write;
use std::path::Path;

use crate::LearnError;

/// 64-bit FNV-1a hash, the body checksum of binary files.
///
/// ```
/// assert_eq!(structlearn::files::fnv1a(b""), 0xcbf2_9ce4_8422_2325); // the FNV-1a offset basis
/// ```
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `magic ‖ body ‖ fnv1a(body)` (little endian).
///
/// ```
/// use structlearn::files::{unwrap_binary, wrap_binary};
/// let file = wrap_binary(b"MYFILE\0\x01", b"body");
/// assert_eq!(unwrap_binary("x".as_ref(), &file, b"MYFILE\0\x01").unwrap(), b"body");
/// let mut corrupt = file.clone();
/// corrupt[9] ^= 1;
/// assert!(unwrap_binary("x".as_ref(), &corrupt, b"MYFILE\0\x01").is_err());
/// ```
pub fn wrap_binary(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(magic);
    out.extend_from_slice(body);
    out.extend_from_slice(&fnv1a(body).to_le_bytes());
    out
}

/// Checks magic (format and version byte) and checksum; returns the body.
///
/// ```
/// use structlearn::files::{unwrap_binary, wrap_binary};
/// let file = wrap_binary(b"MYFILE\0\x01", b"body");
/// assert!(unwrap_binary("f".as_ref(), &file, b"MYFILE\0\x02").is_err()); // another version
/// assert!(unwrap_binary("f".as_ref(), &file[..10], b"MYFILE\0\x01").is_err()); // truncated
/// ```
pub fn unwrap_binary<'a>(path: &Path, bytes: &'a [u8], magic: &[u8; 8]) -> Result<&'a [u8], LearnError> {
    if bytes.len() < 16 {
        return Err(LearnError::bad_file(path, format!("truncated: {} bytes", bytes.len())));
    }
    let (head, rest) = bytes.split_at(8);
    if head[..7] != magic[..7] {
        return Err(LearnError::bad_file(path, "not a file of this kind (wrong magic bytes)"));
    }
    if head[7] != magic[7] {
        return Err(LearnError::bad_file(
            path,
            format!("format version {} is not supported (this build reads version {})", head[7], magic[7]),
        ));
    }
    let (body, sum) = rest.split_at(rest.len() - 8);
    let mut expected = [0u8; 8];
    expected.copy_from_slice(sum);
    if fnv1a(body) != u64::from_le_bytes(expected) {
        return Err(LearnError::bad_file(path, "corrupt or truncated (checksum mismatch)"));
    }
    Ok(body)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder,
/// flushed and synced, then renamed over the target.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("out.txt");
/// structlearn::files::write_atomic(&path, b"all or nothing").unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"all or nothing");
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LearnError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| LearnError::io(path, e))?;
    tmp.write_all(bytes).map_err(|e| LearnError::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| LearnError::io(path, e))?;
    tmp.persist(path).map_err(|e| LearnError::io(path, e.error))?;
    Ok(())
}
