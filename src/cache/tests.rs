//! The store on its own: round trips, misses, and least-recently-used
//! eviction order.

use std::time::{Duration, SystemTime};

use super::{CacheKey, EntryKind, PersistentCache};

fn scratch(name: &str) -> std::path::PathBuf {
    let directory = std::env::temp_dir().join(format!(
        "superstep-cache-unit-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&directory);
    directory
}

#[test]
fn stores_loads_and_misses() {
    let cache = PersistentCache::open(&scratch("round-trip"), 1 << 20).expect("cache");
    let key = CacheKey::of("test", "value");
    assert_eq!(cache.load::<Vec<u32>>(EntryKind::Rows, &key), None);
    cache.store(EntryKind::Rows, &key, &vec![1u32, 2, 3]);
    assert_eq!(
        cache.load::<Vec<u32>>(EntryKind::Rows, &key),
        Some(vec![1, 2, 3])
    );
    // The same key in another kind is another entry.
    assert_eq!(cache.load::<Vec<u32>>(EntryKind::Schedule, &key), None);
    // A payload of the wrong type is rejected, not misread.
    assert_eq!(cache.load::<(u64, u64, u64)>(EntryKind::Rows, &key), None);
    let statistics = cache.statistics();
    assert_eq!((statistics.hits, statistics.misses), (1, 3));
    assert_eq!(statistics.rejected, 1);
    assert_eq!(cache.take_warnings().len(), 1);
}

#[test]
fn evicts_least_recently_used_first() {
    let directory = scratch("eviction");
    let cache = PersistentCache::open(&directory, u64::MAX).expect("cache");
    let keys: Vec<CacheKey> = (0..4u32)
        .map(|index| CacheKey::of("test", &index))
        .collect();
    let payload = vec![7u8; 10_000];
    for key in &keys {
        cache.store(EntryKind::Schedule, key, &payload);
    }
    // Ages: key 0 newest, then 3, 1, 2 (oldest).
    let now = SystemTime::now();
    for (index, age) in [(0, 0), (3, 10), (1, 20), (2, 30)] {
        let file = std::fs::File::options()
            .write(true)
            .open(cache.path(EntryKind::Schedule, &keys[index]))
            .expect("entry");
        file.set_modified(now - Duration::from_secs(age))
            .expect("set time");
    }
    let entry_bytes = cache.size_on_disk() / 4;
    let bounded = PersistentCache::open(&directory, entry_bytes * 2).expect("cache");
    let eviction = bounded.evict();
    assert_eq!(eviction.removed_entries, 2);
    assert!(eviction.bytes_after() <= entry_bytes * 2);
    let present = |index: usize| bounded.path(EntryKind::Schedule, &keys[index]).exists();
    assert!(present(0) && present(3));
    assert!(!present(1) && !present(2));
    // A hit refreshes an entry, so it outlives older ones.
    assert!(
        bounded
            .load::<Vec<u8>>(EntryKind::Schedule, &keys[3])
            .is_some()
    );
    let one = PersistentCache::open(&directory, entry_bytes).expect("cache");
    one.evict();
    assert!(one.path(EntryKind::Schedule, &keys[3]).exists());
    assert!(!one.path(EntryKind::Schedule, &keys[0]).exists());
}

/// The shard folder an entry is stored in.
fn shard_of(cache: &PersistentCache, kind: EntryKind, key: &CacheKey) -> std::path::PathBuf {
    cache.path(kind, key).parent().expect("shard").to_path_buf()
}

/// Eviction removes entries only: a file a user put into the cache folder
/// is neither counted nor deleted, however small the limit.
#[test]
fn eviction_never_deletes_what_is_not_an_entry() {
    let directory = scratch("foreign-files");
    let cache = PersistentCache::open(&directory, u64::MAX).expect("cache");
    let key = CacheKey::of("test", "entry");
    cache.store(EntryKind::Rows, &key, &vec![1u8; 1000]);
    let shard = shard_of(&cache, EntryKind::Rows, &key);
    let notes = shard.join("notes.txt");
    std::fs::write(&notes, "mine").expect("write");
    let top = directory.join("rows").join("README");
    std::fs::write(&top, "mine too").expect("write");
    let entry_bytes = cache.size_on_disk();
    let none = PersistentCache::open(&directory, 0).expect("cache");
    let eviction = none.evict();
    assert_eq!(eviction.entries, 1, "{eviction:?}");
    assert_eq!(eviction.bytes_before, entry_bytes);
    assert_eq!(eviction.removed_entries, 1);
    assert!(notes.exists() && top.exists());
    assert!(!cache.path(EntryKind::Rows, &key).exists());
}

/// A temporary file whose writer died (`kill -9` between writing and
/// renaming) is removed by the next process's pass over the folder; one
/// this process is writing is left alone.
#[test]
fn temporary_files_of_dead_writers_are_cleaned() {
    let directory = scratch("temporary");
    let cache = PersistentCache::open(&directory, u64::MAX).expect("cache");
    let key = CacheKey::of("test", "entry");
    cache.store(EntryKind::Schedule, &key, &vec![1u8; 100]);
    let shard = shard_of(&cache, EntryKind::Schedule, &key);
    // Process ids are below 2^22 on Linux: this one cannot be running.
    let dead = shard.join(format!(".tmp-4294967-0-{}", key.hex()));
    let live = shard.join(format!(".tmp-{}-9-{}", std::process::id(), key.hex()));
    std::fs::write(&dead, "partial").expect("write");
    std::fs::write(&live, "partial").expect("write");
    let eviction = cache.evict();
    assert_eq!(eviction.entries, 1);
    assert!(live.exists(), "this process's write in progress stays");
    if std::path::Path::new("/proc/self").exists() {
        assert!(!dead.exists(), "a dead writer's temporary file is removed");
    }
}

#[test]
fn a_signed_entry_is_trusted_only_by_a_reader_that_lists_its_key() {
    use super::signing::{Signature, SigningKey, TrustedKeys};
    use super::{Provenance, Signing};
    let directory = scratch("signed");
    let (writer, secret) = SigningKey::generate().expect("key");
    let secret = String::from_utf8(secret.as_bytes().to_vec()).expect("text");
    let signed = PersistentCache::open(&directory, 1 << 20)
        .expect("cache")
        .with_signing(Signing {
            signer: Some(SigningKey::parse(&secret, "test").expect("secret")),
            ..Signing::default()
        });
    let key = CacheKey::of("test", "signed");
    signed.store(EntryKind::Figures, &key, &vec![4u32, 5]);
    let provenance_of = |cache: &PersistentCache| {
        cache.load_with(EntryKind::Figures, &key, |_, provenance: Provenance| {
            Ok(provenance)
        })
    };
    // The writer trusts its own key; its entries skip the check.
    let own = provenance_of(&signed).expect("hit");
    assert_eq!(own.signature, Signature::Trusted(writer.public()));
    assert!(!own.needs_check());
    // A reader listing no key sees an unknown signer: checked as unsigned.
    let plain = PersistentCache::open(&directory, 1 << 20).expect("cache");
    let seen = provenance_of(&plain).expect("hit");
    assert_eq!(seen.signature, Signature::UnknownSigner(writer.public()));
    assert!(seen.needs_check());
    // A reader listing the writer's key trusts it.
    let listing = PersistentCache::open(&directory, 1 << 20)
        .expect("cache")
        .with_signing(Signing {
            listed: TrustedKeys::new(vec![writer.public()]),
            ..Signing::default()
        });
    assert!(!provenance_of(&listing).expect("hit").needs_check());
    // The same file rewritten unsigned (the signature stripped) is checked.
    let payload = bincode::serialize(&vec![4u32, 5]).expect("encodes");
    let unsigned = super::entry::encode(EntryKind::Figures, &key, &payload, None).expect("encodes");
    std::fs::write(signed.path(EntryKind::Figures, &key), unsigned).expect("write");
    assert_eq!(
        provenance_of(&listing).expect("hit").signature,
        Signature::Unsigned
    );
    let _ = std::fs::remove_dir_all(&directory);
}
