//! Sharded checkpoints: `model.safetensors.index.json` (as transformers'
//! `save_pretrained(max_shard_size=...)` and the Hub write it) maps each
//! tensor to a shard file in the same folder. The shards are read and
//! validated one by one and joined into one [`SafeTensors`]; the index must
//! describe them exactly: every shard a plain file name beside it, every
//! tensor it lists in the shard it names, every tensor of a shard listed,
//! no tensor in two shards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::{MAX_INDEX_BYTES, SafeTensors, SafeTensorsError};

#[derive(Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

impl SafeTensors {
    /// The shard file names the index at `path` names (read as an input,
    /// bounded), without reading the shards.
    pub fn index_shards(path: &Path) -> Result<Vec<String>, SafeTensorsError> {
        let text = crate::input_file::read(path, MAX_INDEX_BYTES, "a checkpoint index")?;
        let index: Index =
            serde_json::from_slice(&text).map_err(|error| SafeTensorsError::Index {
                path: path.to_path_buf(),
                message: error.to_string(),
            })?;
        let shards: BTreeSet<String> = index.weight_map.into_values().collect();
        Ok(shards.into_iter().collect())
    }

    /// Reads the shards the index at `path` names as one checkpoint.
    pub fn read_sharded(path: &Path) -> Result<SafeTensors, SafeTensorsError> {
        let failure = |message: String| SafeTensorsError::Index {
            path: path.to_path_buf(),
            message,
        };
        let text = crate::input_file::read(path, MAX_INDEX_BYTES, "a checkpoint index")?;
        let index: Index = serde_json::from_slice(&text).map_err(|error| {
            failure(format!(
                "not a checkpoint index (a `weight_map` of tensor names to shard files): {error}"
            ))
        })?;
        if index.weight_map.is_empty() {
            return Err(failure(String::from("its `weight_map` lists no tensors")));
        }
        let folder = path.parent().unwrap_or(Path::new(""));
        let shards: BTreeSet<&String> = index.weight_map.values().collect();
        let mut joined = SafeTensors {
            bytes: Vec::new(),
            data_start: 0,
            tensors: BTreeMap::new(),
            metadata: BTreeMap::new(),
        };
        for shard in shards {
            let plain = Path::new(shard.as_str())
                .file_name()
                .is_some_and(|name| name == shard.as_str());
            if !plain || shard.is_empty() {
                return Err(failure(format!(
                    "shard `{shard}` is not a file name beside the index"
                )));
            }
            let file = SafeTensors::read(&folder.join(shard))?;
            let base = joined.bytes.len();
            joined
                .bytes
                .extend_from_slice(&file.bytes[file.data_start..]);
            for (name, mut entry) in file.tensors {
                match index.weight_map.get(&name) {
                    Some(listed) if listed == shard => {}
                    Some(listed) => {
                        return Err(failure(format!(
                            "tensor `{name}` is in shard `{shard}`, but the index says `{listed}`"
                        )));
                    }
                    None => {
                        return Err(failure(format!(
                            "shard `{shard}` holds tensor `{name}`, which the index does not list"
                        )));
                    }
                }
                entry.begin += base;
                entry.end += base;
                joined.tensors.insert(name, entry);
            }
        }
        if let Some((name, shard)) = index
            .weight_map
            .iter()
            .find(|(name, _)| !joined.tensors.contains_key(*name))
        {
            return Err(failure(format!(
                "the index lists tensor `{name}` in shard `{shard}`, which does not hold it"
            )));
        }
        Ok(joined)
    }
}
