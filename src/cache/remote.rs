//! The remote tier behind the local cache: a shared, content-addressed
//! store of the same entry files (`PREFIX/KIND/XX/KEY`) on any server that
//! takes `PUT` and `GET` (WebDAV, nginx, a Bazel HTTP cache) or an
//! S3-compatible bucket, through the `object_store` crate.
//!
//! Read-through: a local miss asks the remote; what comes back is untrusted
//! and goes through every check of a local entry ([`super::entry::decode`])
//! before it is used or written locally. Write-back: every local store is
//! uploaded in the background (at most [`RemoteSettings::uploads`] at once);
//! [`RemoteCache::finish`] waits for the uploads at most
//! [`RemoteSettings::deadline`]. Nothing here fails or stalls a build: a
//! request is bounded by a timeout and a body by a size limit, and the
//! first failure of the server (refused, timed out, an error status) turns
//! the remote off for the rest of the process, reported in one summary
//! line. A 404 is an ordinary miss. The URL is shown without credentials;
//! a bearer token comes from [`TOKEN_VARIABLE`], never from a file, and is
//! never printed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{
    BackoffConfig, ClientOptions, HeaderMap, HeaderValue, ObjectStore, ObjectStoreExt, PutPayload,
    RetryConfig,
};

/// Requests in flight at once when a batch of entries is fetched.
pub const BATCH_REQUESTS: usize = 16;

/// The environment variable holding a bearer token for an `http(s)` remote.
pub const TOKEN_VARIABLE: &str = "SUPERSTEP_CACHE_TOKEN";

/// How a remote is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteSettings {
    /// Bound on one request (connect, headers and body).
    pub timeout: Duration,
    /// How long a build waits at its end for its uploads.
    pub deadline: Duration,
    /// The largest entry read; a larger body is rejected unread.
    pub max_entry_bytes: u64,
    /// Uploads in flight at once.
    pub uploads: usize,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            timeout: Duration::from_millis(2_000),
            deadline: Duration::from_millis(2_000),
            max_entry_bytes: 512 << 20,
            uploads: 4,
        }
    }
}

/// A remote URL that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("remote cache {url}: {reason}")]
pub struct RemoteError {
    pub url: String,
    pub reason: String,
}

/// What a lookup found.
#[derive(Debug)]
pub enum Fetched {
    Found(Vec<u8>),
    /// Not on the server (or the remote is off).
    Absent,
}

/// The remote's use by one process, as its summary line shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteReport {
    /// The URL without credentials.
    pub url: String,
    pub hits: u64,
    pub misses: u64,
    /// Entries the server sent that failed a check (not used, not kept).
    pub rejected: u64,
    pub uploaded: u64,
    pub failed_uploads: u64,
    /// Uploads still running at the deadline (abandoned).
    pub abandoned_uploads: u64,
    pub bytes_downloaded: u64,
    pub bytes_uploaded: u64,
    /// Why the remote was turned off, when it was.
    pub unavailable: Option<String>,
    /// Lookups and uploads skipped once it was.
    pub skipped: u64,
    /// Entries of kinds without a check for meaning that no trusted key
    /// signed (not used, not kept).
    pub untrusted: u64,
}

impl std::fmt::Display for RemoteReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let megabytes = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
        write!(
            formatter,
            "remote {}: {} hits, {} misses ({} rejected), {} uploaded; {:.1} MiB down, {:.1} MiB up",
            self.url,
            self.hits,
            self.misses,
            self.rejected,
            self.uploaded,
            megabytes(self.bytes_downloaded),
            megabytes(self.bytes_uploaded)
        )?;
        if self.failed_uploads + self.abandoned_uploads > 0 {
            write!(
                formatter,
                "; {} uploads failed, {} abandoned at the deadline",
                self.failed_uploads, self.abandoned_uploads
            )?;
        }
        if self.unavailable.is_some() {
            write!(formatter, "; turned off (see the warning)")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    rejected: AtomicU64,
    uploaded: AtomicU64,
    failed_uploads: AtomicU64,
    bytes_downloaded: AtomicU64,
    bytes_uploaded: AtomicU64,
    skipped: AtomicU64,
    untrusted: AtomicU64,
}

/// A remote cache tier.
pub struct RemoteCache {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: StorePath,
    settings: RemoteSettings,
    runtime: tokio::runtime::Runtime,
    permits: Arc<tokio::sync::Semaphore>,
    uploads: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    unavailable: Arc<Mutex<Option<String>>>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for RemoteCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RemoteCache")
            .field("url", &self.url)
            .finish()
    }
}

/// `url` without user information, query or fragment.
pub fn display_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

/// Why an http(s) URL without a host is refused.
const NO_HOST: &str =
    "names no host (http(s)://HOST/PATH, e.g. http://cache.internal:8080/superstep)";

impl RemoteCache {
    /// A remote at `url` (`http(s)://HOST/PATH` or `s3://BUCKET/PREFIX`).
    /// Nothing is contacted here.
    pub fn open(url: &str, settings: RemoteSettings) -> Result<RemoteCache, RemoteError> {
        let shown = display_url(url);
        let failure = |reason: String| RemoteError {
            url: shown.clone(),
            reason,
        };
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 0,
            retry_timeout: settings.timeout,
        };
        let mut options = ClientOptions::new()
            .with_timeout(settings.timeout)
            .with_connect_timeout(settings.timeout)
            .with_allow_http(true);
        let (store, prefix): (Arc<dyn ObjectStore>, String) =
            if let Some(rest) = url.strip_prefix("s3://") {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(failure("names no bucket (s3://BUCKET/PREFIX)".to_string()));
                }
                let store = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_client_options(options)
                    .with_retry(retry)
                    .build()
                    .map_err(|error| failure(error.to_string()))?;
                (Arc::new(store), prefix.to_string())
            } else if let Some(rest) = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
            {
                let authority = rest.split('/').next().unwrap_or("");
                let host = authority.rsplit('@').next().unwrap_or(authority);
                if host.is_empty() || host.starts_with(':') {
                    return Err(failure(NO_HOST.to_string()));
                }
                if let Ok(token) = std::env::var(TOKEN_VARIABLE) {
                    let mut headers = HeaderMap::new();
                    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                        .map_err(|_| {
                            failure(format!("{TOKEN_VARIABLE} is not a valid header value"))
                        })?;
                    value.set_sensitive(true);
                    headers.insert("authorization", value);
                    options = options.with_default_headers(headers);
                }
                let store = object_store::http::HttpBuilder::new()
                    .with_url(url)
                    .with_client_options(options)
                    .with_retry(retry)
                    .build()
                    .map_err(|error| failure(error.to_string()))?;
                (Arc::new(store), String::new())
            } else {
                return Err(failure(
                    "is neither http(s)://HOST/PATH nor s3://BUCKET/PREFIX".to_string(),
                ));
            };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("superstep-remote")
            .enable_all()
            .build()
            .map_err(|error| failure(format!("cannot start its client ({error})")))?;
        Ok(RemoteCache {
            url: shown,
            store,
            prefix: StorePath::from(prefix.trim_matches('/')),
            settings,
            runtime,
            permits: Arc::new(tokio::sync::Semaphore::new(settings.uploads.max(1))),
            uploads: Mutex::new(Vec::new()),
            unavailable: Arc::new(Mutex::new(None)),
            counters: Arc::new(Counters::default()),
        })
    }

    /// The URL without credentials.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn location(&self, relative: &str) -> StorePath {
        relative
            .split('/')
            .fold(self.prefix.clone(), |location, part| location.join(part))
    }

    fn is_unavailable(&self) -> bool {
        self.unavailable
            .lock()
            .map(|reason| reason.is_some())
            .unwrap_or(true)
    }

    /// The entry at `relative` (`KIND/XX/KEY`), unchecked: the caller
    /// checks it like a local file.
    pub fn fetch(&self, relative: &str) -> Fetched {
        self.fetch_counting(relative, true)
    }

    /// [`RemoteCache::fetch`], counting an entry the server does not have
    /// as a miss only when `count_absent` (an entry that is usually absent,
    /// or one asked for again and again, is not a miss; a failed request
    /// always is).
    pub fn fetch_counting(&self, relative: &str, count_absent: bool) -> Fetched {
        if self.is_unavailable() {
            self.counters.skipped.fetch_add(1, Ordering::Relaxed);
            return Fetched::Absent;
        }
        let location = self.location(relative);
        let store = self.store.clone();
        let limit = self.settings.max_entry_bytes;
        let read = async move {
            let result = match store.get(&location).await {
                Ok(result) => result,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(error) => return Err(error.to_string()),
            };
            if result.meta.size > limit {
                return Err(format!(
                    "an entry of {} bytes, over the {limit}-byte limit",
                    result.meta.size
                ));
            }
            let mut bytes = Vec::with_capacity(result.meta.size as usize);
            let mut stream = result.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|error| error.to_string())?;
                if bytes.len() as u64 + chunk.len() as u64 > limit {
                    return Err(format!("a body over the {limit}-byte limit"));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(Some(bytes))
        };
        let outcome = self
            .runtime
            .block_on(async { tokio::time::timeout(self.settings.timeout, read).await });
        match outcome {
            Ok(Ok(Some(bytes))) => {
                self.counters
                    .bytes_downloaded
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                Fetched::Found(bytes)
            }
            Ok(Ok(None)) => {
                if count_absent {
                    self.counters.misses.fetch_add(1, Ordering::Relaxed);
                }
                Fetched::Absent
            }
            Ok(Err(reason)) => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                self.turn_off(reason);
                Fetched::Absent
            }
            Err(_) => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                self.turn_off(format!(
                    "no answer within {} ms",
                    self.settings.timeout.as_millis()
                ));
                Fetched::Absent
            }
        }
    }

    /// The entries at `relatives`, fetched at most [`BATCH_REQUESTS`] at
    /// once, all within one request timeout per [`BATCH_REQUESTS`] entries;
    /// each unchecked (the caller checks them like local files). A fault
    /// turns the remote off as [`RemoteCache::fetch`] does; what had not
    /// arrived is absent.
    pub fn fetch_many(&self, relatives: &[String]) -> Vec<Fetched> {
        if self.is_unavailable() || relatives.is_empty() {
            return relatives.iter().map(|_| Fetched::Absent).collect();
        }
        let limit = self.settings.max_entry_bytes;
        let requests = relatives.iter().map(|relative| {
            let location = self.location(relative);
            let store = self.store.clone();
            async move {
                let result = match store.get(&location).await {
                    Ok(result) => result,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(error) => return Err(error.to_string()),
                };
                if result.meta.size > limit {
                    return Err(format!(
                        "an entry of {} bytes, over the {limit}-byte limit",
                        result.meta.size
                    ));
                }
                let bytes = result.bytes().await.map_err(|error| error.to_string())?;
                Ok(Some(bytes.to_vec()))
            }
        });
        let batches = relatives.len().div_ceil(BATCH_REQUESTS) as u32;
        let bound = self.settings.timeout * batches.max(1);
        let outcome = self.runtime.block_on(async {
            tokio::time::timeout(
                bound,
                futures::stream::iter(requests)
                    .buffered(BATCH_REQUESTS)
                    .collect::<Vec<_>>(),
            )
            .await
        });
        let Ok(results) = outcome else {
            self.turn_off(format!(
                "a batch of {} entries did not arrive within {} ms",
                relatives.len(),
                bound.as_millis()
            ));
            return relatives.iter().map(|_| Fetched::Absent).collect();
        };
        results
            .into_iter()
            .map(|result| match result {
                Ok(Some(bytes)) => {
                    self.counters
                        .bytes_downloaded
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    Fetched::Found(bytes)
                }
                Ok(None) => Fetched::Absent,
                Err(reason) => {
                    self.turn_off(reason);
                    Fetched::Absent
                }
            })
            .collect()
    }

    /// Counts a batch-fetched entry that was kept locally (a hit of the
    /// remote; the local cache then serves it).
    pub fn record_prefetched(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fetched entry as used.
    pub fn record_hit(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fetched entry as rejected by the checks: a server that
    /// sends entries that fail them is not asked again.
    pub fn record_rejected(&self, relative: &str, reason: &str) {
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        self.turn_off(format!("sent {relative}, which fails its check: {reason}"));
    }

    /// Counts a fetched entry that no trusted key signed, of a kind whose
    /// value cannot be checked for meaning: not used, not kept, and the
    /// remote stays on (another writer's entries are not an attack).
    pub fn record_untrusted(&self) {
        self.counters.untrusted.fetch_add(1, Ordering::Relaxed);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// The one warning of a remote that was turned off, or else of the
    /// entries it sent that no trusted key signed (none otherwise).
    pub fn warning(report: &RemoteReport) -> Option<String> {
        if let Some(reason) = &report.unavailable {
            return Some(format!(
                "remote cache {}: {reason}; not used for the rest of this run \
                 ({} lookups and uploads fell back to local work)",
                report.url, report.skipped
            ));
        }
        (report.untrusted > 0).then(|| {
            format!(
                "remote cache {}: {} entries no trusted key signed were not used \
                 (their kinds have no independent check); recomputed",
                report.url, report.untrusted
            )
        })
    }

    fn turn_off(&self, reason: String) {
        if let Ok(mut unavailable) = self.unavailable.lock()
            && unavailable.is_none()
        {
            // The reason may quote the request URL: never its credentials.
            *unavailable = Some(scrub(&reason));
        }
    }

    /// Uploads `bytes` to `relative` in the background.
    pub fn upload(&self, relative: &str, bytes: Vec<u8>) {
        if self.is_unavailable() {
            self.counters.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let location = self.location(relative);
        let store = self.store.clone();
        let permits = self.permits.clone();
        let counters = self.counters.clone();
        let unavailable = self.unavailable.clone();
        let timeout = self.settings.timeout;
        let handle = self.runtime.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let length = bytes.len() as u64;
            let put = store.put(&location, PutPayload::from(bytes));
            match tokio::time::timeout(timeout, put).await {
                Ok(Ok(_)) => {
                    counters.uploaded.fetch_add(1, Ordering::Relaxed);
                    counters.bytes_uploaded.fetch_add(length, Ordering::Relaxed);
                }
                outcome => {
                    counters.failed_uploads.fetch_add(1, Ordering::Relaxed);
                    let reason = match outcome {
                        Ok(Err(error)) => format!("upload: {error}"),
                        _ => format!("upload: no answer within {} ms", timeout.as_millis()),
                    };
                    if let Ok(mut off) = unavailable.lock()
                        && off.is_none()
                    {
                        *off = Some(scrub(&reason));
                    }
                }
            }
        });
        if let Ok(mut uploads) = self.uploads.lock() {
            uploads.retain(|upload| !upload.is_finished());
            uploads.push(handle);
        }
    }

    /// Waits for the uploads (at most the deadline) and reports.
    pub fn finish(&self) -> RemoteReport {
        let handles: Vec<tokio::task::JoinHandle<()>> = self
            .uploads
            .lock()
            .map(|mut uploads| std::mem::take(&mut *uploads))
            .unwrap_or_default();
        let deadline = self.settings.deadline;
        let abandoned = self.runtime.block_on(async move {
            let mut abandoned = 0u64;
            let stop = tokio::time::Instant::now() + deadline;
            for handle in handles {
                let abort = handle.abort_handle();
                if tokio::time::timeout_at(stop, handle).await.is_err() {
                    abort.abort();
                    abandoned += 1;
                }
            }
            abandoned
        });
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        RemoteReport {
            url: self.url.clone(),
            hits: load(&counters.hits),
            misses: load(&counters.misses),
            rejected: load(&counters.rejected),
            uploaded: load(&counters.uploaded),
            failed_uploads: load(&counters.failed_uploads),
            abandoned_uploads: abandoned,
            bytes_downloaded: load(&counters.bytes_downloaded),
            bytes_uploaded: load(&counters.bytes_uploaded),
            unavailable: self
                .unavailable
                .lock()
                .ok()
                .and_then(|reason| reason.clone()),
            skipped: load(&counters.skipped),
            untrusted: load(&counters.untrusted),
        }
    }
}

/// `text` with anything that looks like `user:password@` in a URL removed.
fn scrub(text: &str) -> String {
    let mut scrubbed = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("://") {
        scrubbed.push_str(&rest[..start + 3]);
        rest = &rest[start + 3..];
        let end = rest
            .find(|character: char| character == '/' || character.is_whitespace())
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            rest = &rest[at + 1..];
        }
    }
    scrubbed.push_str(rest);
    scrubbed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            display_url("https://user:secret@cache.example:8080/superstep?token=x"),
            "https://cache.example:8080/superstep"
        );
        assert_eq!(display_url("s3://bucket/prefix"), "s3://bucket/prefix");
        assert_eq!(
            scrub("error sending request for url (http://me:pw@127.0.0.1:9/a/b)"),
            "error sending request for url (http://127.0.0.1:9/a/b)"
        );
    }

    #[test]
    fn an_s3_url_opens_without_contacting_anything() {
        let remote = RemoteCache::open("s3://team-cache/superstep/ci", RemoteSettings::default())
            .expect("opens");
        assert_eq!(remote.url(), "s3://team-cache/superstep/ci");
        assert_eq!(
            remote.location("rows/ab/abcd").as_ref(),
            "superstep/ci/rows/ab/abcd"
        );
        let error =
            RemoteCache::open("s3:///prefix", RemoteSettings::default()).expect_err("no bucket");
        assert!(error.to_string().contains("names no bucket"), "{error}");
    }

    #[test]
    fn a_url_of_another_scheme_is_refused_by_name() {
        let error =
            RemoteCache::open("ftp://host/x", RemoteSettings::default()).expect_err("refused");
        for hostless in ["http:///x", "https://", "http://:8080/cache"] {
            let error =
                RemoteCache::open(hostless, RemoteSettings::default()).expect_err("no host");
            assert!(
                error.to_string().contains("names no host"),
                "{hostless}: {error}"
            );
        }
        assert!(error.to_string().contains("neither http(s)://"), "{error}");
    }
}
