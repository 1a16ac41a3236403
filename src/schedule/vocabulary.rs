//! The scheduler's vocabulary: the schedule policies (how the pieces of a
//! phase are ordered for placement) and transfer widths, with their text
//! forms. The scheduler owns these; build files and the command line parse
//! into them (`crate::build_file`), and every record that carries a policy
//! serializes it as that text (`policy_text`).

use std::fmt;
use std::str::FromStr;

/// An exchange schedule policy: how the pieces of a phase are ordered for
/// placement (this module's parent documents each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SchedulePolicy {
    /// Dependency depth, then endpoint pressure, heaviest first.
    Latency,
    /// `S<W>`: compact streams cut into waves of `W` words.
    Stream { words: u32 },
    /// `B<W>`: the same waves, heaviest endpoints first within a wave.
    Balanced { words: u32 },
    /// Time-ordered list scheduling: the ready piece with the earliest start.
    List,
    /// Matching waves: point-to-point pieces in rounds in which no tile sends
    /// or receives twice (a bipartite edge colouring).
    Matching,
    /// Every candidate order, per phase; the best measured schedule wins.
    Auto,
}

/// The largest wave, in words, a policy may name.
pub const MAX_WAVE_WORDS: u32 = 65536;

impl fmt::Display for SchedulePolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedulePolicy::Latency => formatter.write_str("latency"),
            SchedulePolicy::Stream { words } => write!(formatter, "S{words}"),
            SchedulePolicy::Balanced { words } => write!(formatter, "B{words}"),
            SchedulePolicy::List => formatter.write_str("list"),
            SchedulePolicy::Matching => formatter.write_str("matching"),
            SchedulePolicy::Auto => formatter.write_str("auto"),
        }
    }
}

/// A string that is not a schedule policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a schedule policy ({reason}); expected `auto`, `list`, `matching`, \
     `latency`, `S<W>` or `B<W>` with W wave words in 1..=65536, e.g. S256 or B1024"
)]
pub struct PolicyParseError {
    pub text: String,
    pub reason: &'static str,
}

impl FromStr for SchedulePolicy {
    type Err = PolicyParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let failure = |reason| PolicyParseError {
            text: text.to_string(),
            reason,
        };
        match text {
            "latency" => return Ok(SchedulePolicy::Latency),
            "list" => return Ok(SchedulePolicy::List),
            "matching" => return Ok(SchedulePolicy::Matching),
            "auto" => return Ok(SchedulePolicy::Auto),
            _ => {}
        }
        let mut characters = text.chars();
        let kind = characters.next().ok_or_else(|| failure("it is empty"))?;
        let digits = characters.as_str();
        let make: fn(u32) -> SchedulePolicy = match kind {
            'S' => |words| SchedulePolicy::Stream { words },
            'B' => |words| SchedulePolicy::Balanced { words },
            _ => {
                return Err(failure(
                    "it is none of the named policies and starts with neither `S` nor `B`",
                ));
            }
        };
        if digits.is_empty() {
            return Err(failure("the wave size is missing"));
        }
        if !digits.chars().all(|character| character.is_ascii_digit()) {
            return Err(failure("the wave size is not a decimal number"));
        }
        let words: u32 = digits
            .parse()
            .map_err(|_| failure("the wave size is too large"))?;
        if words == 0 {
            return Err(failure("the wave size is 0"));
        }
        if words > MAX_WAVE_WORDS {
            return Err(failure("the wave size is above 65536"));
        }
        Ok(make(words))
    }
}

/// Word width of exchange transfers, spelt everywhere (build files, text,
/// JSON) as the build file spells it: `auto`, `word32`, `paired64`
/// (documents written before read with the old `Word32` spellings too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TransferWidth {
    #[serde(rename = "auto", alias = "Auto")]
    Auto,
    #[serde(rename = "word32", alias = "Word32")]
    Word32,
    #[serde(rename = "paired64", alias = "Paired64")]
    Paired64,
}

impl std::fmt::Display for TransferWidth {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl TransferWidth {
    /// The build-file spelling: `auto`, `word32` or `paired64`.
    pub fn name(self) -> &'static str {
        match self {
            TransferWidth::Auto => "auto",
            TransferWidth::Word32 => "word32",
            TransferWidth::Paired64 => "paired64",
        }
    }
}

/// A string that is not a transfer width.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a transfer width; expected `auto`, `word32` or `paired64`")]
pub struct WidthParseError {
    pub text: String,
}

impl FromStr for TransferWidth {
    type Err = WidthParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(TransferWidth::Auto),
            "word32" => Ok(TransferWidth::Word32),
            "paired64" => Ok(TransferWidth::Paired64),
            _ => Err(WidthParseError {
                text: text.to_string(),
            }),
        }
    }
}

/// Serializes a policy as its build-file text (`matching`, `B64`), so that
/// reports, JSON documents and tables read as the build file does, and
/// deserializes that text back (`FromStr`): every record that carries a
/// policy writes it with `#[serde(with = "policy_text")]`.
pub mod policy_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::schedule::vocabulary::SchedulePolicy;

    pub fn serialize<S: Serializer>(
        policy: &SchedulePolicy,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(policy)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SchedulePolicy, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::{SchedulePolicy, TransferWidth, policy_text};

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Carried {
        #[serde(with = "policy_text")]
        policy: SchedulePolicy,
    }

    /// A record's policy is written as the build file writes it and read
    /// back from that text.
    #[test]
    fn a_policy_is_written_and_read_as_its_text() {
        for (policy, text) in [
            (SchedulePolicy::Auto, "auto"),
            (SchedulePolicy::Latency, "latency"),
            (SchedulePolicy::List, "list"),
            (SchedulePolicy::Matching, "matching"),
            (SchedulePolicy::Stream { words: 256 }, "S256"),
            (SchedulePolicy::Balanced { words: 1024 }, "B1024"),
        ] {
            let json = serde_json::to_string(&Carried { policy }).expect("serialises");
            assert_eq!(json, format!("{{\"policy\":\"{text}\"}}"));
            let read: Carried = serde_json::from_str(&json).expect("reads");
            assert_eq!(read.policy, policy);
        }
        let wrong = serde_json::from_str::<Carried>(r#"{"policy":"B0"}"#);
        assert!(wrong.is_err());
    }

    /// One spelling everywhere: the build file's, in text and in JSON,
    /// and documents written with the old variant names still read.
    #[test]
    fn a_width_is_spelt_as_the_build_file_spells_it() {
        for (width, name) in [
            (TransferWidth::Auto, "auto"),
            (TransferWidth::Word32, "word32"),
            (TransferWidth::Paired64, "paired64"),
        ] {
            assert_eq!(width.to_string(), name);
            assert_eq!(name.parse::<TransferWidth>(), Ok(width));
            let json = serde_json::to_string(&width).expect("serialises");
            assert_eq!(json, format!("\"{name}\""));
            let old = format!("\"{width:?}\"");
            let read: TransferWidth = serde_json::from_str(&old).expect("the old spelling reads");
            assert_eq!(read, width);
        }
    }
}
