//! The configurations a sweep measures every phase under: a schedule
//! policy and a transfer width, written `POLICY/WIDTH` (`S64/word32`,
//! `B1024/paired64`). The default set is the seed study's (latency, S64,
//! S256, S1024, B64, B256, B1024 and B4096) and every other order `auto`
//! considers (matching, list, B16), each with 32-bit words and with every
//! eligible piece paired. A `paired64` configuration is measured only
//! on phases where some piece may move paired (see
//! `crate::schedule::timing::paired_eligible`); elsewhere it would repeat
//! the `word32` point.

use std::fmt;
use std::str::FromStr;

use crate::schedule::vocabulary::{PolicyParseError, WidthParseError};
use crate::schedule::{SchedulePolicy, TransferWidth};

/// One configuration of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct SweepConfig {
    pub policy: SchedulePolicy,
    pub width: TransferWidth,
}

impl SweepConfig {
    /// Whether the configuration is measured on a phase whose pieces are
    /// (`pairing_eligible`) or are not eligible for paired transfers.
    pub fn applies(&self, pairing_eligible: bool) -> bool {
        self.width != TransferWidth::Paired64 || pairing_eligible
    }
}

impl fmt::Display for SweepConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.policy, self.width.name())
    }
}

/// Writes a configuration as its text (`B1024/word32`), the way
/// `--config` takes it (`#[serde(serialize_with = "config_text")]`).
pub fn config_text<S: serde::Serializer>(
    config: &SweepConfig,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(config)
}

/// [`config_text`] of a configuration that may be absent (written `null`).
pub fn optional_config_text<S: serde::Serializer>(
    config: &Option<SweepConfig>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match config {
        Some(config) => serializer.collect_str(config),
        None => serializer.serialize_none(),
    }
}

/// The policies of the default sweep, in the order reports list them: the
/// seed study's, then the rest of `auto`'s candidate orders (a test holds
/// that every one of them is here).
pub const DEFAULT_POLICIES: [SchedulePolicy; 11] = [
    SchedulePolicy::Latency,
    SchedulePolicy::Stream { words: 64 },
    SchedulePolicy::Stream { words: 256 },
    SchedulePolicy::Stream { words: 1024 },
    SchedulePolicy::Balanced { words: 64 },
    SchedulePolicy::Balanced { words: 256 },
    SchedulePolicy::Balanced { words: 1024 },
    SchedulePolicy::Balanced { words: 4096 },
    SchedulePolicy::Matching,
    SchedulePolicy::List,
    SchedulePolicy::Balanced { words: 16 },
];

/// The widths a policy without `/WIDTH` is measured at.
pub const DEFAULT_WIDTHS: [TransferWidth; 2] = [TransferWidth::Word32, TransferWidth::Paired64];

/// Every default policy at both widths.
pub fn default_configs() -> Vec<SweepConfig> {
    DEFAULT_POLICIES
        .iter()
        .flat_map(|&policy| {
            DEFAULT_WIDTHS
                .iter()
                .map(move |&width| SweepConfig { policy, width })
        })
        .collect()
}

/// A `--config` value that names no configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigParseError {
    #[error("{0}")]
    Policy(#[from] PolicyParseError),
    #[error("{0}")]
    Width(#[from] WidthParseError),
}

/// `P` (both widths) or `P/WIDTH`, as `--config` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigList(pub Vec<SweepConfig>);

impl FromStr for ConfigList {
    type Err = ConfigParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (policy, width) = match text.split_once('/') {
            Some((policy, width)) => (policy.trim(), Some(width.trim())),
            None => (text.trim(), None),
        };
        let policy: SchedulePolicy = policy.parse()?;
        Ok(ConfigList(match width {
            Some(width) => vec![SweepConfig {
                policy,
                width: width.parse()?,
            }],
            None => DEFAULT_WIDTHS
                .iter()
                .map(|&width| SweepConfig { policy, width })
                .collect(),
        }))
    }
}

/// The configurations of several `--config` values, each once, in the
/// order first given (none given: the default set).
pub fn chosen_configs(lists: &[ConfigList]) -> Vec<SweepConfig> {
    if lists.is_empty() {
        return default_configs();
    }
    let mut configs: Vec<SweepConfig> = Vec::new();
    for config in lists.iter().flat_map(|list| &list.0) {
        if !configs.contains(config) {
            configs.push(*config);
        }
    }
    configs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::candidates::{FIRST_STAGE, SECOND_STAGE, THIRD_STAGE};

    #[test]
    fn the_default_set_has_every_order_auto_considers_at_both_widths() {
        let defaults = default_configs();
        for policy in FIRST_STAGE.iter().chain(&SECOND_STAGE).chain(&THIRD_STAGE) {
            for width in DEFAULT_WIDTHS {
                assert!(
                    defaults.contains(&SweepConfig {
                        policy: *policy,
                        width
                    }),
                    "{policy}/{} is not in the default sweep",
                    width.name()
                );
            }
        }
        assert_eq!(defaults.len(), 22);
        assert_eq!(defaults[0].to_string(), "latency/word32");
        assert_eq!(defaults[15].to_string(), "B4096/paired64");
    }

    #[test]
    fn configs_parse_with_and_without_a_width() {
        let list: ConfigList = "S64".parse().expect("parses");
        assert_eq!(list.0.len(), 2);
        let list: ConfigList = "B256/paired64".parse().expect("parses");
        assert_eq!(
            list.0,
            vec![SweepConfig {
                policy: SchedulePolicy::Balanced { words: 256 },
                width: TransferWidth::Paired64
            }]
        );
        assert!("S0".parse::<ConfigList>().is_err());
        assert!("S64/word16".parse::<ConfigList>().is_err());
        let chosen = chosen_configs(&[
            "S64/word32".parse().expect("parses"),
            "S64".parse().expect("parses"),
        ]);
        assert_eq!(chosen.len(), 2);
        assert!(!chosen[1].applies(false));
        assert!(chosen[1].applies(true));
    }
}
