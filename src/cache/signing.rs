//! Signed cache entries: who wrote an entry, and whether this reader trusts
//! them. A writer holds an Ed25519 secret key and signs each entry it
//! stores over the entry's key, kind, compiler version, payload length and
//! payload digest ([`signed_message`]); a reader lists the public keys it
//! trusts. An entry whose signature verifies against a trusted key is used
//! without its kind's check for meaning; anything else is checked (or
//! recomputed) as an unsigned entry is.
//!
//! The signatures are `ring`'s Ed25519; nothing here is home-made
//! cryptography. Keys are written as text: a public key as
//! `ed25519:` and 64 hex digits, a secret as `ed25519-secret:` and the
//! 64 hex digits of its seed. A secret comes only from the environment
//! ([`SIGNING_KEY_VARIABLE`], or a file named by
//! [`SIGNING_KEY_FILE_VARIABLE`]) or from the per-user key made on first
//! use ([`local_signing_key`]), never from a build file, and is never
//! printed (its `Debug` shows the public key only).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use super::key::CacheKey;

/// The environment variable holding a writer's secret key (text).
pub const SIGNING_KEY_VARIABLE: &str = "SUPERSTEP_CACHE_SIGNING_KEY";
/// The environment variable naming a file that holds a writer's secret key.
pub const SIGNING_KEY_FILE_VARIABLE: &str = "SUPERSTEP_CACHE_SIGNING_KEY_FILE";
/// The environment variable naming the per-user local key's file (default:
/// `$XDG_CONFIG_HOME/superstep/local-cache.key`, else
/// `$HOME/.config/superstep/local-cache.key`).
pub const LOCAL_KEY_VARIABLE: &str = "SUPERSTEP_LOCAL_CACHE_KEY";

const PUBLIC_PREFIX: &str = "ed25519:";
const SECRET_PREFIX: &str = "ed25519-secret:";
/// The domain of every signed message (a signature made for anything else
/// never verifies as an entry's).
const SIGNATURE_DOMAIN: &[u8] = b"superstep cache entry signature v1\0";

pub const PUBLIC_KEY_BYTES: usize = 32;
pub const SIGNATURE_BYTES: usize = 64;

/// A key that cannot be used, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{origin}: `{shown}` is not a public key (ed25519: and 64 hex digits)")]
    Public { origin: String, shown: String },
    /// The secret itself is never shown.
    #[error("{origin}: not a secret key (ed25519-secret: and 64 hex digits)")]
    Secret { origin: String },
    #[error("{origin}: {reason}")]
    File { origin: String, reason: String },
}

/// Why a new signing key could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    #[error("the system's random source failed")]
    RandomSource,
    #[error("the key cannot be made")]
    KeyPair,
}

/// An Ed25519 public key: who signed an entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey(pub [u8; PUBLIC_KEY_BYTES]);

impl fmt::Display for PublicKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{PUBLIC_PREFIX}{}", hex(&self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, formatter)
    }
}

impl PublicKey {
    /// Parses `ed25519:HEX`; `origin` names where the text came from.
    pub fn parse(text: &str, origin: &str) -> Result<PublicKey, KeyError> {
        let failure = || KeyError::Public {
            origin: origin.to_string(),
            shown: text.trim().chars().take(80).collect(),
        };
        let digits = text
            .trim()
            .strip_prefix(PUBLIC_PREFIX)
            .ok_or_else(failure)?;
        unhex::<PUBLIC_KEY_BYTES>(digits)
            .map(PublicKey)
            .ok_or_else(failure)
    }

    /// Whether `signature` is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, signature)
            .is_ok()
    }
}

/// A writer's secret key. Its `Debug` shows only the public key.
pub struct SigningKey {
    pair: Ed25519KeyPair,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "SigningKey({})", self.public)
    }
}

impl SigningKey {
    fn from_seed(seed: &[u8; 32]) -> Option<SigningKey> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).ok()?;
        let mut public = [0u8; PUBLIC_KEY_BYTES];
        public.copy_from_slice(pair.public_key().as_ref());
        Some(SigningKey {
            pair,
            public: PublicKey(public),
        })
    }

    /// A new key from the system's random source, with its secret text
    /// (to be written where only its owner reads it).
    pub fn generate() -> Result<(SigningKey, SecretText), GenerateError> {
        let mut seed = [0u8; 32];
        SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| GenerateError::RandomSource)?;
        let key = SigningKey::from_seed(&seed).ok_or(GenerateError::KeyPair)?;
        let text = SecretText(format!("{SECRET_PREFIX}{}\n", hex(&seed)));
        seed.fill(0);
        Ok((key, text))
    }

    /// Parses a secret's text; `origin` names where it came from (never
    /// the text itself).
    pub fn parse(text: &str, origin: &str) -> Result<SigningKey, KeyError> {
        let failure = || KeyError::Secret {
            origin: origin.to_string(),
        };
        let digits = text
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or_else(failure)?;
        let mut seed = unhex::<32>(digits).ok_or_else(failure)?;
        let key = SigningKey::from_seed(&seed).ok_or_else(failure);
        seed.fill(0);
        key
    }

    pub fn public(&self) -> PublicKey {
        self.public
    }

    pub fn sign(&self, message: &[u8]) -> [u8; SIGNATURE_BYTES] {
        let mut signature = [0u8; SIGNATURE_BYTES];
        signature.copy_from_slice(self.pair.sign(message).as_ref());
        signature
    }
}

/// A secret key's text, only ever written to a file (no `Debug`, no
/// `Display`).
pub struct SecretText(String);

impl SecretText {
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// What a signature covers: the entry's key, kind (its stored byte,
/// `EntryKind as u8`), the compiler that made it, the payload's length and
/// the digest of its stored bytes.
pub fn signed_message(
    kind: u8,
    key: &CacheKey,
    tool: &[u8],
    payload_length: u64,
    stored_digest: &[u8; 32],
) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_DOMAIN.len() + 1 + 32 + 2 + tool.len() + 40);
    message.extend_from_slice(SIGNATURE_DOMAIN);
    message.push(kind);
    message.extend_from_slice(&key.0);
    message.extend_from_slice(&(tool.len() as u16).to_le_bytes());
    message.extend_from_slice(tool);
    message.extend_from_slice(&payload_length.to_le_bytes());
    message.extend_from_slice(stored_digest);
    message
}

/// How a stored entry is signed, as its reader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signature {
    /// No signature.
    Unsigned,
    /// Signed by a key this reader trusts, and the signature verifies.
    Trusted(PublicKey),
    /// Signed by a key this reader does not list (not verified: it would
    /// prove nothing).
    UnknownSigner(PublicKey),
    /// Claims a trusted key, but the signature does not verify: the entry
    /// was changed after it was signed (or re-keyed).
    Invalid(PublicKey),
}

impl Signature {
    pub fn is_trusted(self) -> bool {
        matches!(self, Signature::Trusted(_))
    }
}

/// The public keys a reader trusts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys {
    keys: Vec<PublicKey>,
}

impl TrustedKeys {
    pub fn new(mut keys: Vec<PublicKey>) -> TrustedKeys {
        keys.sort();
        keys.dedup();
        TrustedKeys { keys }
    }

    pub fn insert(&mut self, key: PublicKey) {
        if let Err(position) = self.keys.binary_search(&key) {
            self.keys.insert(position, key);
        }
    }

    pub fn contains(&self, key: &PublicKey) -> bool {
        self.keys.binary_search(key).is_ok()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// How `signature` by `signer` over `message` stands with this reader.
    pub fn judge(&self, signer: PublicKey, message: &[u8], signature: &[u8]) -> Signature {
        if !self.contains(&signer) {
            Signature::UnknownSigner(signer)
        } else if signer.verifies(message, signature) {
            Signature::Trusted(signer)
        } else {
            Signature::Invalid(signer)
        }
    }
}

/// The writer's key from the environment: [`SIGNING_KEY_VARIABLE`] (the
/// secret's text) or [`SIGNING_KEY_FILE_VARIABLE`] (a file holding it);
/// `None` when neither is set.
pub fn environment_signing_key() -> Result<Option<SigningKey>, KeyError> {
    if let Ok(text) = std::env::var(SIGNING_KEY_VARIABLE) {
        return SigningKey::parse(&text, SIGNING_KEY_VARIABLE).map(Some);
    }
    let Some(path) = std::env::var_os(SIGNING_KEY_FILE_VARIABLE) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    let origin = format!("{SIGNING_KEY_FILE_VARIABLE} = {}", path.display());
    let text = std::fs::read_to_string(&path).map_err(|error| KeyError::File {
        origin: origin.clone(),
        reason: format!("cannot be read ({error})"),
    })?;
    SigningKey::parse(&text, &origin).map(Some)
}

/// Where the per-user local key lives.
pub fn local_key_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(LOCAL_KEY_VARIABLE) {
        return Some(PathBuf::from(path));
    }
    let configuration = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(configuration.join("superstep").join("local-cache.key"))
}

/// The per-user key that marks what this user's compiler produced and
/// checked, made on first use (mode 0600, outside any cache folder).
pub fn local_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    let origin = format!("the local cache key {}", path.display());
    match std::fs::read_to_string(path) {
        Ok(text) => return SigningKey::parse(&text, &origin),
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(KeyError::File {
                origin,
                reason: format!("cannot be read ({error})"),
            });
        }
        Err(_) => {}
    }
    let failure = |reason: String| KeyError::File {
        origin: origin.clone(),
        reason,
    };
    let (_, secret) = SigningKey::generate().map_err(|error| failure(error.to_string()))?;
    write_secret(path, &secret).map_err(|error| failure(format!("cannot be made ({error})")))?;
    // Another process may have made it first: the file's key is the one.
    let text = std::fs::read_to_string(path)
        .map_err(|error| failure(format!("cannot be read ({error})")))?;
    SigningKey::parse(&text, &origin)
}

/// Writes a secret to `path` readable by its owner only (mode 0600), never
/// over an existing file: the secret goes to a temporary file beside it,
/// which is then linked into place (failing if `path` exists).
pub fn write_secret(path: &Path, secret: &SecretText) -> std::io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)?;
    // Unique per process and per call: two threads making the key at once
    // must not remove each other's temporary file.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = folder.join(format!(
        ".tmp-{}-{call}-{}",
        std::process::id(),
        path.file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let _ = std::fs::remove_file(&temporary);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(secret.as_bytes())?;
        file.sync_all()
    });
    let linked = written.and_then(|()| match std::fs::hard_link(&temporary, path) {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&temporary);
    linked
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex<const N: usize>(digits: &str) -> Option<[u8; N]> {
    if digits.len() != 2 * N || !digits.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; N];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * index..2 * index + 2], 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_as_text_and_sign() {
        let (key, secret) = SigningKey::generate().expect("key");
        let text = String::from_utf8(secret.as_bytes().to_vec()).expect("text");
        let parsed = SigningKey::parse(&text, "test").expect("parses");
        assert_eq!(parsed.public(), key.public());
        let public = PublicKey::parse(&key.public().to_string(), "test").expect("public");
        let signature = key.sign(b"message");
        assert!(public.verifies(b"message", &signature));
        assert!(!public.verifies(b"massage", &signature));
        // The secret is never in a key's debug form.
        let digits = text.trim().strip_prefix(SECRET_PREFIX).expect("prefix");
        assert!(!format!("{key:?}").contains(digits));
    }

    #[test]
    fn bad_key_text_is_refused_without_echoing_a_secret() {
        assert!(PublicKey::parse("ed25519:abcd", "--cache-trusted-key").is_err());
        let error = SigningKey::parse("ed25519-secret:zz-top-secret", SIGNING_KEY_VARIABLE)
            .expect_err("refused");
        assert!(!error.to_string().contains("top-secret"), "{error}");
        assert!(error.to_string().contains(SIGNING_KEY_VARIABLE), "{error}");
    }

    #[test]
    fn trust_is_by_listed_key_and_valid_signature() {
        let (writer, _) = SigningKey::generate().expect("key");
        let (stranger, _) = SigningKey::generate().expect("key");
        let trusted = TrustedKeys::new(vec![writer.public()]);
        let signature = writer.sign(b"entry");
        assert!(
            trusted
                .judge(writer.public(), b"entry", &signature)
                .is_trusted()
        );
        assert_eq!(
            trusted.judge(writer.public(), b"other", &signature),
            Signature::Invalid(writer.public())
        );
        let foreign = stranger.sign(b"entry");
        assert_eq!(
            trusted.judge(stranger.public(), b"entry", &foreign),
            Signature::UnknownSigner(stranger.public())
        );
    }

    #[test]
    fn the_local_key_is_made_once_owner_only() {
        let folder = std::env::temp_dir().join(format!("superstep-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        let path = folder.join("local-cache.key");
        let first = local_signing_key(&path).expect("made");
        let second = local_signing_key(&path).expect("read");
        assert_eq!(first.public(), second.public());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&folder);
    }
}
