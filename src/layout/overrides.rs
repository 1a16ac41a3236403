//! Per-operator layout overrides: a partition (and optionally a tile order)
//! that replaces the cost model's choice for one matrix product or one
//! attention, named by the op's provenance path. `superstep search` writes
//! them (`[[layout.override]]`), a plain build applies them without
//! searching.
//!
//! Owns the override type, its spelling (`ROWSxCOLSxREDUCTION[/ORDER]` for
//! matrix products, `QUERIESxKEYS[/ORDER]` for attention) and the error an
//! override that cannot be applied gives. It does not parse build files
//! (`crate::build_file` does) and does not plan (the planner applies them).

use std::fmt;

use super::cost::{AttentionOrder, TileOrder};

/// The partition an override asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Partition {
    /// A matrix product split into `rows x cols x reduction` blocks.
    MatMul {
        rows: u32,
        cols: u32,
        reduction: u32,
        order: TileOrder,
    },
    /// Attention split into `queries x keys` blocks per group block.
    Attention {
        queries: u32,
        keys: u32,
        order: AttentionOrder,
    },
}

/// Why a partition's text is not a partition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// One of the `x`-separated parts is not a positive whole number.
    #[error(
        "`{part}` in partition `{text}` is not a positive whole number; write \
         ROWSxCOLSxREDUCTION for a matrix product (e.g. `8x46x4`) or \
         QUERIESxKEYS for attention (e.g. `23x4`)"
    )]
    NotAPositiveNumber { part: String, text: String },
    /// Neither three parts (a matrix product) nor two (attention).
    #[error(
        "partition `{text}` has {count} numbers; write ROWSxCOLSxREDUCTION for a matrix \
         product (e.g. `8x46x4`) or QUERIESxKEYS for attention (e.g. `23x4`)"
    )]
    PartCount { text: String, count: usize },
    /// The tile order after `/` is none of the kind's orders.
    #[error("unknown tile order `{order}` for {kind}; expected one of {expected}")]
    UnknownOrder {
        order: String,
        kind: &'static str,
        expected: String,
    },
}

impl PartitionError {
    /// Whether the tile order (after `/`) is what is wrong, not the parts.
    pub fn is_about_the_order(&self) -> bool {
        matches!(self, PartitionError::UnknownOrder { .. })
    }
}

impl Partition {
    /// Reads `8x8x23`, `8x8x23/kcr`, `23x4` or `23x4/kq`.
    pub fn parse(text: &str) -> Result<Partition, PartitionError> {
        let (parts, order) = match text.split_once('/') {
            Some((parts, order)) => (parts, Some(order)),
            None => (text, None),
        };
        let numbers: Vec<u32> = parts
            .split('x')
            .map(|part| {
                part.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&number| number > 0)
                    .ok_or_else(|| PartitionError::NotAPositiveNumber {
                        part: part.to_string(),
                        text: text.to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        match *numbers.as_slice() {
            [rows, cols, reduction] => {
                let order = match order {
                    None => TileOrder::default(),
                    Some(name) => {
                        TileOrder::parse(name).ok_or_else(|| PartitionError::UnknownOrder {
                            order: name.to_string(),
                            kind: "a matrix product",
                            expected: names(TileOrder::ALL.iter().map(|order| order.name())),
                        })?
                    }
                };
                Ok(Partition::MatMul {
                    rows,
                    cols,
                    reduction,
                    order,
                })
            }
            [queries, keys] => {
                let order = match order {
                    None => AttentionOrder::default(),
                    Some(name) => {
                        AttentionOrder::parse(name).ok_or_else(|| PartitionError::UnknownOrder {
                            order: name.to_string(),
                            kind: "attention",
                            expected: names(AttentionOrder::ALL.iter().map(|order| order.name())),
                        })?
                    }
                };
                Ok(Partition::Attention {
                    queries,
                    keys,
                    order,
                })
            }
            _ => Err(PartitionError::PartCount {
                text: text.to_string(),
                count: numbers.len(),
            }),
        }
    }

    /// The parts alone (`8x8x23`, `23x4`).
    pub fn parts(&self) -> String {
        match self {
            Partition::MatMul {
                rows,
                cols,
                reduction,
                ..
            } => format!("{rows}x{cols}x{reduction}"),
            Partition::Attention { queries, keys, .. } => format!("{queries}x{keys}"),
        }
    }

    /// The order's name, or `None` for the default order.
    pub fn order_name(&self) -> Option<&'static str> {
        match self {
            Partition::MatMul { order, .. } => {
                (*order != TileOrder::default()).then(|| order.name())
            }
            Partition::Attention { order, .. } => {
                (*order != AttentionOrder::default()).then(|| order.name())
            }
        }
    }

    /// Distance between two partitions of the same kind (sum of the parts'
    /// differences, an order change counting one), for "nearest" advice.
    pub fn distance(&self, other: &Partition) -> u32 {
        match (self, other) {
            (
                Partition::MatMul {
                    rows,
                    cols,
                    reduction,
                    order,
                },
                Partition::MatMul {
                    rows: other_rows,
                    cols: other_cols,
                    reduction: other_reduction,
                    order: other_order,
                },
            ) => {
                rows.abs_diff(*other_rows)
                    + cols.abs_diff(*other_cols)
                    + reduction.abs_diff(*other_reduction)
                    + u32::from(order != other_order)
            }
            (
                Partition::Attention {
                    queries,
                    keys,
                    order,
                },
                Partition::Attention {
                    queries: other_queries,
                    keys: other_keys,
                    order: other_order,
                },
            ) => {
                queries.abs_diff(*other_queries)
                    + keys.abs_diff(*other_keys)
                    + u32::from(order != other_order)
            }
            _ => u32::MAX,
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.order_name() {
            Some(order) => write!(formatter, "{}/{order}", self.parts()),
            None => write!(formatter, "{}", self.parts()),
        }
    }
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One `[[layout.override]]`: the op (`layer.mlp.down`) and its partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LayoutOverride {
    pub op: String,
    pub partition: Partition,
}

/// An override the planner could not apply, with the advice to give.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("layout override for `{op}`: {message}")]
pub struct OverrideError {
    pub op: String,
    pub message: String,
    /// Valid choices nearest to what was asked (op names or partitions).
    pub nearest: Vec<String>,
    /// Why it cannot apply.
    pub cause: OverrideCause,
}

/// Why an override cannot apply: only [`OverrideCause::Memory`] may be
/// cured by a smaller configuration (a build's fit probing looks for one);
/// the others are errors of the override itself under this configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverrideCause {
    /// The op does not exist, is not a product or attention, takes the
    /// other kind of partition, or is overridden twice.
    Entry,
    /// The partition cannot split the op's shape on the tiles: the
    /// configuration field named (`workload.batch`, `machine.tiles`, ...)
    /// makes it impossible.
    Configuration(&'static str),
    /// The partition splits the op but its working set does not fit.
    Memory,
}

impl OverrideError {
    /// The advice line: the nearest valid choices.
    pub fn help(&self) -> String {
        let choices = if self.nearest.is_empty() {
            String::from("remove the override, or run `superstep search` to find valid ones")
        } else {
            format!("the nearest valid choices: {}", self.nearest.join(", "))
        };
        match self.cause {
            OverrideCause::Configuration(field) => format!(
                "{choices}; or limit the entry to the configuration it was chosen for (e.g. \
                 when = {{ batch = 1 }}) so that a build with another {field} skips it"
            ),
            _ => choices,
        }
    }
}

/// The `TOML` fragment of `overrides`: one `[[layout.override]]` table
/// each, with `when = WHEN` when given (an inline table naming the
/// configuration the entries hold for).
pub fn overrides_toml(overrides: &[LayoutOverride], when: Option<&str>) -> String {
    let mut text = String::new();
    for layout_override in overrides {
        text.push_str("[[layout.override]]\n");
        text.push_str(&format!("op = \"{}\"\n", layout_override.op));
        text.push_str(&format!(
            "partition = \"{}\"\n",
            layout_override.partition.parts()
        ));
        if let Some(order) = layout_override.partition.order_name() {
            text.push_str(&format!("order = \"{order}\"\n"));
        }
        if let Some(when) = when {
            text.push_str(&format!("when = {when}\n"));
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_round_trip_through_their_spelling() {
        for text in ["8x46x4", "8x8x23/kcr", "23x4", "23x4/kq"] {
            let partition = Partition::parse(text).expect(text);
            assert_eq!(partition.to_string(), text);
        }
        assert_eq!(
            Partition::parse("8x46x4/rck")
                .expect("default order")
                .to_string(),
            "8x46x4"
        );
    }

    #[test]
    fn bad_partitions_say_what_to_write() {
        for (text, expected) in [
            ("8x0x4", "not a positive whole number"),
            ("8", "has 1 numbers"),
            ("1x2x3x4", "has 4 numbers"),
            ("8x8x8/xyz", "unknown tile order `xyz` for a matrix product"),
            ("8x8/rck", "unknown tile order `rck` for attention"),
            ("ax8", "`a` in partition"),
        ] {
            let error = Partition::parse(text).expect_err(text);
            assert!(error.to_string().contains(expected), "{text}: {error}");
            // The order's errors, and only they, point at the order.
            assert_eq!(
                error.is_about_the_order(),
                text.contains('/'),
                "{text}: {error:?}"
            );
        }
    }
}
