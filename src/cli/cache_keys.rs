//! `superstep cache keygen`: make an Ed25519 key pair for signing cache
//! entries. The secret goes to a file only its owner reads (mode 0600,
//! never over an existing file) and is never printed; the public key is
//! printed, and written beside the secret as FILE.pub, for readers to list
//! in `[cache] trusted_keys` or `--cache-trusted-key`.

use std::path::PathBuf;

use super::command_error::CommandError;
use crate::cache::signing::{SIGNING_KEY_FILE_VARIABLE, SigningKey, write_secret};
use crate::output_file::write_atomically;

/// The subcommands of `superstep cache`.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// Make a key pair for signing cache entries: the secret to FILE (mode
    /// 0600; refused if FILE exists), the public key to FILE.pub and to
    /// standard output. A writer (CI) signs with the secret, given in
    /// SUPERSTEP_CACHE_SIGNING_KEY or in a file named by
    /// SUPERSTEP_CACHE_SIGNING_KEY_FILE (never in a build file); readers
    /// trust the public key with [cache] trusted_keys or
    /// --cache-trusted-key.
    ///
    /// Example:
    ///   superstep cache keygen --output ci-cache.key
    #[command(verbatim_doc_comment)]
    Keygen(KeygenArguments),
}

/// The flags of `superstep cache keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArguments {
    /// Where the secret key goes (the public key goes to FILE.pub).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
}

pub fn run(command: &CacheCommand) -> Result<(), CommandError> {
    match command {
        CacheCommand::Keygen(arguments) => keygen(arguments),
    }
}

fn keygen(arguments: &KeygenArguments) -> Result<(), CommandError> {
    let secret_path = &arguments.output;
    if secret_path.exists() {
        return Err(CommandError::Input(format!(
            "error: --output {}: the file exists; a key is never overwritten\n  \
             help: name a new file, or remove the old key first",
            secret_path.display()
        )));
    }
    let (key, secret) =
        SigningKey::generate().map_err(|error| CommandError::Internal(error.to_string()))?;
    write_secret(secret_path, &secret).map_err(|error| {
        CommandError::Input(format!(
            "error: --output {}: cannot be written ({error})",
            secret_path.display()
        ))
    })?;
    let mut public_path = secret_path.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    let public = key.public().to_string();
    write_atomically(&public_path, format!("{public}\n").as_bytes())
        .map_err(|error| CommandError::Input(format!("error: {error}")))?;
    println!("{public}");
    eprintln!(
        "secret key written to {} (owner only); public key to {}\n\
         sign with: {SIGNING_KEY_FILE_VARIABLE}={} superstep build ...\n\
         trust with: --cache-trusted-key {public} (or [cache] trusted_keys = [\"{public}\"])",
        secret_path.display(),
        public_path.display(),
        secret_path.display(),
    );
    Ok(())
}
