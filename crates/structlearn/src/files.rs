//! Binary file framing (magic, checksum) and atomic writes, shared by data
//! sets, model files and checkpoints.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::LearnError;

/// 64-bit FNV-1a hash, the body checksum of binary files.
///
/// ```
/// assert_eq!(structlearn::files::fnv1a(b""), 0xcbf2_9ce4_8422_2325); // the FNV-1a offset basis
/// ```
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_continue(FNV_OFFSET, bytes)
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

/// Writes `bytes` to `path` atomically: a temporary file next to the target,
/// written, synced, then renamed over it (readers see the old file or the new
/// one, never a part). The file is created like any other, so its mode follows
/// the umask; a failure removes the temporary file and reports the target.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("out.txt");
/// structlearn::files::write_atomic(&path, b"all or nothing").unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"all or nothing");
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LearnError> {
    write_atomic_io(path, bytes).map_err(|e| LearnError::io(path, e))
}

/// [`write_atomic`] with the bare I/O error (for other crates' error types).
/// Temporary names never appear in errors: they are `.NAME.PID.N.tmp` in the
/// target's folder, removed on failure.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let err = structlearn::files::write_atomic_io(&dir.path().join("no/such/f"), b"x").unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// ```
pub fn write_atomic_io(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// [`write_atomic_io`] with the contents written by `write` (into a buffered
/// writer on the temporary file), so a large file need not exist in memory
/// first.
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("lines.txt");
/// structlearn::files::write_atomic_with(&path, |w| (0..3).try_for_each(|i| writeln!(w, "{i}"))).unwrap();
/// assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n1\n2\n");
/// ```
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let target = replaced_file(path)?;
    let path = target.as_path();
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names a folder, not a file"))?;
    let dir = folder_of(path);
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        let mut buffered = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut buffered)?;
        let file = buffered.into_inner().map_err(std::io::IntoInnerError::into_error)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    } else if let Ok(d) = std::fs::File::open(dir) {
        // Make the rename itself durable where the platform allows it.
        let _ = d.sync_all();
    }
    result
}

/// Writes `magic ‖ body ‖ fnv1a(body)` (the file [`wrap_binary`] makes)
/// atomically, the body streamed from `body` and hashed on the way, so it is
/// never held in memory whole.
///
/// ```
/// use std::io::Write;
/// use structlearn::files::{unwrap_binary, wrap_binary, write_binary_atomic};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("f.bin");
/// write_binary_atomic(&path, b"MYFILE\0\x01", |w| w.write_all(b"body")).unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), wrap_binary(b"MYFILE\0\x01", b"body"));
/// ```
pub fn write_binary_atomic(
    path: &Path,
    magic: &[u8; 8],
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), LearnError> {
    write_atomic_with(path, |file| {
        file.write_all(magic)?;
        let mut hashing = HashingWriter { inner: file, hash: FNV_OFFSET };
        body(&mut hashing)?;
        let sum = hashing.hash;
        file.write_all(&sum.to_le_bytes())
    })
    .map_err(|e| LearnError::io(path, e))
}

/// FNV-1a's offset basis (the hash of no bytes).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `bytes` continued from `hash`.
pub(crate) fn fnv1a_continue(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Passes bytes through from `inner`, hashing what was read (the body
/// checksum of a binary file read as a stream).
pub(crate) struct HashingReader<R> {
    pub(crate) inner: R,
    pub(crate) hash: u64,
}

impl<R: std::io::Read> HashingReader<R> {
    /// Hashes what is read from `inner` from now on.
    pub(crate) fn new(inner: R) -> Self {
        Self { inner, hash: FNV_OFFSET }
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash = fnv1a_continue(self.hash, &buf[..n]);
        Ok(n)
    }
}

/// Passes bytes through to `inner`, hashing what was written.
struct HashingWriter<'a> {
    inner: &'a mut dyn Write,
    hash: u64,
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash = fnv1a_continue(self.hash, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Checks, before any long work, that `path` can be written by
/// [`write_atomic`]: its folder exists and accepts new files, and the path is
/// not a folder. Leaves no file behind.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// assert!(structlearn::files::check_writable(&dir.path().join("model.slm")).is_ok());
/// assert!(structlearn::files::check_writable(&dir.path().join("missing/model.slm")).is_err());
/// assert!(structlearn::files::check_writable(dir.path()).is_err());
/// ```
pub fn check_writable(path: &Path) -> Result<(), LearnError> {
    let shown = path;
    let target = replaced_file(path).map_err(|e| LearnError::io(shown, e))?;
    let path = target.as_path();
    let folder = folder_of(path);
    if !folder.is_dir() {
        let what = if folder.exists() { "is not a folder" } else { "does not exist (create it first)" };
        return Err(LearnError::io(
            shown,
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("its folder {} {what}", folder.display())),
        ));
    }
    let probe = path.with_file_name(format!(
        ".{}.{}.probe",
        path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        std::process::id()
    ));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).map_err(|e| LearnError::io(shown, e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The folder `path` is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The file an atomic write to `path` replaces: `path` itself, or the file a
/// symbolic link `path` points to (so the link stays and its target gets the
/// new contents). Refused: a folder and anything that is
/// not a regular file (a pipe, a device, a socket), which a write by renaming
/// a new file over it would replace by a plain file.
fn replaced_file(path: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::io::{Error, ErrorKind};
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(path) {
            Ok(target) => target,
            // A link to a file not written yet: that file, relative to the link's folder.
            Err(_) => folder_of(path).join(std::fs::read_link(path)?),
        },
        _ => path.to_path_buf(),
    };
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => Err(Error::new(ErrorKind::IsADirectory, "is a folder, not a file")),
        Ok(m) if !m.is_file() => Err(Error::new(
            ErrorKind::InvalidInput,
            "is not a regular file (a pipe, device or socket); files are written by replacing them, so give the \
             path of a regular file",
        )),
        _ => Ok(target),
    }
}

/// Refuses a command line that names one file for two jobs where one of them
/// writes it: each output against every input and every other output
/// (`(option, path)` pairs, e.g. `("--output", …)`, `("--data", …)`). Paths
/// compare as the files they name (links and `..` resolved; an output that does
/// not exist yet by its folder).
///
/// ```
/// use std::path::Path;
/// let dir = tempfile::tempdir().unwrap();
/// let data = dir.path().join("test.sld");
/// std::fs::write(&data, b"x").unwrap();
/// let same = dir.path().join("sub/../test.sld");
/// std::fs::create_dir(dir.path().join("sub")).unwrap();
/// let err = structlearn::files::check_distinct(&[("--data", &data)], &[("--output", &same)]).unwrap_err();
/// assert!(err.to_string().contains("given as --output and as --data"), "{err}");
/// let other = dir.path().join("predictions.json");
/// structlearn::files::check_distinct(&[("--data", &data)], &[("--output", &other)]).unwrap();
/// ```
pub fn check_distinct(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<(), LearnError> {
    let id = |p: &Path| -> Option<std::path::PathBuf> {
        if let Ok(c) = std::fs::canonicalize(p) {
            return Some(c);
        }
        Some(std::fs::canonicalize(folder_of(p)).ok()?.join(p.file_name()?))
    };
    for (i, &(role, path)) in outputs.iter().enumerate() {
        let Some(mine) = id(path) else { continue };
        let others = inputs.iter().chain(&outputs[..i]);
        if let Some(&(other, _)) = others.into_iter().find(|(_, q)| id(q).as_ref() == Some(&mine)) {
            return Err(LearnError::SamePath {
                path: path.display().to_string(),
                role: role.into(),
                other: other.into(),
            });
        }
    }
    Ok(())
}
