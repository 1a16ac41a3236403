//! Studies: the work that runs the compiler many times, or one phase many
//! ways, to answer one question, above the session and asking only its
//! public methods, as a user of the compiler would:
//! - the layout search (`layout_search`: which partitions and tile orders
//!   make the whole program cheapest, trial by trial as incremental
//!   rebuilds);
//! - fit probing (`fit_probing`: what batch, layer count or other setting
//!   would make a model fit, by building candidates);
//! - the exchange sweep (`sweep`: every phase under a set of policies and
//!   widths, each phase's frontier and the overrides a rule selects);
//! - the packing counterfactuals (`packing`: chosen phases packed tighter,
//!   checked and measured);
//! - suggestions (`suggestions`: the overrides a build could take, each
//!   proved by scheduling the phase under every standard policy);
//! - the copy-boundary audit (`copy_audit`: where each copy/fill group of
//!   the low program may move and what blocks it).
//!
//! A study owns its loop, its record and its keeping in the cache; the
//! session owns the compiler (its database, the queries and what one build
//! computes). Nothing below the session imports a study.

pub mod copy_audit;
pub mod fit_probing;
pub mod layout_search;
pub mod packing;
pub mod suggestions;
pub mod sweep;
