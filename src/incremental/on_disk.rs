//! The persistent cache as one combinator (rustc's `cache_on_disk_if`):
//! a provider says what its value is keyed by, when a loaded entry is
//! usable and how to compute the value; [`cache_on_disk`] loads, checks,
//! computes and stores. Providers never touch the disk themselves, and a
//! database without a persistent cache never computes a key.

use super::database::Db;
use crate::cache::{CacheKey, EntryError, EntryKind, PayloadError, Provenance, Refusal};
use crate::place::Placement;
use crate::rows::PhaseRows;
use crate::rows::serial::{decode_rows, encode_rows};
use crate::schedule::{Schedule, ScheduleFigures};

/// A value kept in the persistent cache: its entry kind and payload codec.
pub trait Persisted: Sized {
    const KIND: EntryKind;
    fn encode(&self) -> Result<Vec<u8>, PayloadError>;
    fn decode(payload: &[u8]) -> Result<Self, PayloadError>;
}

pub(crate) fn bincode_encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, PayloadError> {
    Ok(bincode::serialize(value)?)
}

pub(crate) fn bincode_decode<T: serde::de::DeserializeOwned>(
    payload: &[u8],
) -> Result<T, PayloadError> {
    Ok(bincode::deserialize(payload)?)
}

/// A [`Persisted`] value whose payload is its bincode encoding.
macro_rules! persisted_by_bincode {
    ($($type:ty => $kind:ident),* $(,)?) => {
        $(impl $crate::incremental::on_disk::Persisted for $type {
            const KIND: $crate::cache::EntryKind = $crate::cache::EntryKind::$kind;
            fn encode(&self) -> Result<Vec<u8>, $crate::cache::PayloadError> {
                $crate::incremental::on_disk::bincode_encode(self)
            }
            fn decode(payload: &[u8]) -> Result<Self, $crate::cache::PayloadError> {
                $crate::incremental::on_disk::bincode_decode(payload)
            }
        })*
    };
}
pub(crate) use persisted_by_bincode;

persisted_by_bincode! {
    Schedule => Schedule,
    ScheduleFigures => Figures,
    Placement => Placement,
}

/// Rows use their compact form: a generic serializer visiting every word
/// dominates a warm build's loading.
impl Persisted for PhaseRows {
    const KIND: EntryKind = EntryKind::Rows;
    fn encode(&self) -> Result<Vec<u8>, PayloadError> {
        Ok(encode_rows(self))
    }
    fn decode(payload: &[u8]) -> Result<Self, PayloadError> {
        decode_rows(payload).map_err(|error| PayloadError::Compact(error.to_string()))
    }
}

/// `compute()`, served from the database's persistent cache when it has
/// one: the entry under `key()` is returned if it decodes and `check`
/// accepts it; otherwise the value is computed and, on success, stored.
/// `check` sees where the entry came from and how it is signed: every
/// entry must fit the shapes its users index by (no cached value may make
/// the compiler panic), and one no trusted key signed must also pass the
/// independent checker of its kind (a failure is a miss with one warning
/// naming the entry and the check; a remote one is never kept locally). `key` runs only when the database has a
/// cache. An entry that cannot be encoded is left out with a warning.
pub fn cache_on_disk<T: Persisted, E>(
    db: &dyn Db,
    key: impl FnOnce() -> Result<CacheKey, E>,
    check: impl FnOnce(&T, Provenance) -> Result<(), Refusal>,
    compute: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let Some(cache) = db.cache_for(T::KIND) else {
        return compute();
    };
    let key = key()?;
    let loaded = cache.load_with(T::KIND, &key, |payload, source| {
        let value = T::decode(payload).map_err(EntryError::Undecodable)?;
        check(&value, source)
            .map(|()| value)
            .map_err(EntryError::Refused)
    });
    if let Some(cached) = loaded {
        return Ok(cached);
    }
    let value = crate::cache::within_computation(compute)?;
    match value.encode() {
        Ok(payload) => cache.store_payload(T::KIND, &key, &payload),
        Err(error) => cache.warn(format!(
            "cache: cannot encode a {:?} entry: {error}",
            T::KIND
        )),
    }
    Ok(value)
}

/// The check for meaning of a cached value whose only independent check is
/// making it again from checked inputs (a rows summary, the row table):
/// `Ok` when `remake()` gives the same value; `what` names the value in
/// the refusal, `from` what it is made from.
pub fn check_by_remaking<T: PartialEq, E: std::fmt::Display>(
    cached: &T,
    remake: impl FnOnce() -> Result<T, E>,
    what: &'static str,
    from: &'static str,
) -> Result<(), Refusal> {
    match remake() {
        Ok(value) if value == *cached => Ok(()),
        Ok(_) => Err(Refusal::NotRemade { what, from }),
        Err(error) => Err(Refusal::Unverifiable {
            what: from,
            detail: error.to_string(),
        }),
    }
}
