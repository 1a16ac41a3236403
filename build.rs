//! Build script: a fingerprint of the compiler's own source, so that the
//! persistent cache (src/cache/) never serves results computed by a
//! different compiler. The fingerprint is a 64-bit FNV-1a hash of every
//! file under `src/` (sorted paths and contents); it is exposed as the
//! `SUPERSTEP_SOURCE_FINGERPRINT` environment variable at compile time.

use std::fs;
use std::path::{Path, PathBuf};

fn collect(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.push(PathBuf::from("Cargo.lock"));
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &byte in bytes {
            hash ^= byte as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for file in &files {
        feed(file.to_string_lossy().as_bytes());
        feed(&[0]);
        if let Ok(contents) = fs::read(file) {
            feed(&contents);
        }
        feed(&[0]);
    }
    println!("cargo:rustc-env=SUPERSTEP_SOURCE_FINGERPRINT={hash:016x}");
}
