//! Where results go: `[outputs]` (the artifacts folder and which files)
//! and `[cache]` (the remote URL, a scheme the client speaks and no
//! credentials in the file, and the remote's timeout and deadline).

use std::path::PathBuf;

use toml::Spanned;

use super::DEFAULT_OUTPUT_DIRECTORY;
use super::Resolver;
use super::keys::*;
use crate::build_file::error::Issue;
use crate::build_file::schema::{CacheSection, QueryFile};
use crate::build_file::{CacheSettings, Outputs};

impl Resolver<'_> {
    pub(super) fn outputs(&self, file: &QueryFile) -> Result<Outputs, Issue> {
        let section = &file.outputs;
        let directory = match &section.directory {
            Some(field) if field.get_ref().trim().is_empty() => {
                return Err(Issue::new(
                    OUTPUTS_DIRECTORY,
                    self.origin(OUTPUTS_DIRECTORY, field),
                    "outputs.directory is empty",
                )
                .label("empty path")
                .help("name a folder, e.g. \"artifacts\" (relative to the current directory)"));
            }
            Some(field) => PathBuf::from(field.get_ref()),
            None => PathBuf::from(DEFAULT_OUTPUT_DIRECTORY),
        };
        let flag =
            |field: &Option<Spanned<bool>>| field.as_ref().is_none_or(|value| *value.get_ref());
        Ok(Outputs {
            directory,
            report: flag(&section.report),
            phases_csv: flag(&section.phases_csv),
            html: flag(&section.html),
            package: flag(&section.package),
        })
    }

    pub(super) fn cache(&self, file: &QueryFile) -> Result<CacheSettings, Issue> {
        let section = &file.cache;
        let defaults = CacheSettings::default();
        let milliseconds = |path: &str, field: &Option<Spanned<i64>>, default: u64| {
            field.as_ref().map_or(Ok(default), |field| {
                self.integer(
                    path,
                    field,
                    1,
                    600_000,
                    "give milliseconds, e.g. 2000 (at most 600000)",
                )
                .map(|value| value as u64)
            })
        };
        let remote = match &section.remote {
            None => None,
            Some(field) => Some(self.remote_url(field)?),
        };
        Ok(CacheSettings {
            remote,
            remote_timeout_ms: milliseconds(
                CACHE_REMOTE_TIMEOUT_MS,
                &section.remote_timeout_ms,
                defaults.remote_timeout_ms,
            )?,
            remote_deadline_ms: milliseconds(
                CACHE_REMOTE_DEADLINE_MS,
                &section.remote_deadline_ms,
                defaults.remote_deadline_ms,
            )?,
            trusted_keys: self.trusted_keys(section)?,
        })
    }

    /// `cache.trusted_keys`: public keys only. A secret key's text there is
    /// refused without being echoed.
    fn trusted_keys(&self, section: &CacheSection) -> Result<Vec<String>, Issue> {
        let Some(keys) = &section.trusted_keys else {
            return Ok(Vec::new());
        };
        let mut trusted = Vec::new();
        for (index, key) in keys.get_ref().iter().enumerate() {
            let path = format!("cache.trusted_keys[{index}]");
            let text = key.get_ref().trim();
            if text.starts_with("ed25519-secret:") {
                return Err(Issue::new(
                    path.clone(),
                    self.origin(CACHE_TRUSTED_KEYS, key),
                    format!("`{path}` is a secret key; a build file never holds one"),
                )
                .label("a secret in a build file")
                .help(
                    "remove it from the file (and make a new key: this one is no longer \
                     secret); list the public key (ed25519:HEX, from `superstep cache \
                     keygen`) instead, and give the secret to writers in \
                     SUPERSTEP_CACHE_SIGNING_KEY or SUPERSTEP_CACHE_SIGNING_KEY_FILE",
                )
                .secret());
            }
            if let Err(error) = crate::cache::signing::PublicKey::parse(text, &path) {
                return Err(Issue::new(path.clone(), self.origin(CACHE_TRUSTED_KEYS, key), error.to_string())
                    .label("not a public key")
                    .help("write the key `superstep cache keygen` printed, e.g. \"ed25519:3f2a...\" (64 hex digits)"));
            }
            trusted.push(text.to_string());
        }
        Ok(trusted)
    }

    fn remote_url(&self, field: &Spanned<String>) -> Result<String, Issue> {
        let url = field.get_ref().trim();
        let path = CACHE_REMOTE;
        let scheme_end = url.find("://");
        let scheme = scheme_end.map(|end| &url[..end]);
        if !matches!(scheme, Some("http" | "https" | "s3")) {
            return Err(Issue::new(
                path,
                self.origin(path, field),
                format!("cache.remote = \"{url}\" is not a remote cache URL"),
            )
            .label("not http(s):// or s3://")
            .help(
                "name a server that takes PUT and GET, e.g. \"http://cache.internal:8080/superstep\", \
                 or a bucket, e.g. \"s3://team-cache/superstep\"",
            ));
        }
        let rest = &url[scheme_end.unwrap_or(0) + 3..];
        let authority = rest.split('/').next().unwrap_or("");
        if authority.is_empty() {
            return Err(Issue::new(
                path,
                self.origin(path, field),
                format!("cache.remote = \"{url}\" names no host or bucket"),
            )
            .label("no host")
            .help("e.g. \"http://cache.internal:8080/superstep\""));
        }
        if authority.contains('@') || url.contains('?') {
            return Err(Issue::new(
                path,
                self.origin(path, field),
                "cache.remote carries credentials; a build file must not",
            )
            .label("credentials in the URL")
            .help(
                "drop the user, password or query from the URL; give a bearer token in the \
                 SUPERSTEP_CACHE_TOKEN environment variable (S3 keys: AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY)",
            ));
        }
        Ok(url.to_string())
    }
}
