//! Studies: the work that runs the compiler many times to answer one
//! question, above the session and asking only its public methods, as a
//! user of the compiler would: the layout search (`layout_search`: which
//! partitions and tile orders make the whole program cheapest, trial by
//! trial as incremental rebuilds) and fit probing (`fit_probing`: what
//! batch, layer count or other setting would make a model fit, by
//! building candidates).
//!
//! A study owns its loop, its record and its keeping in the cache; the
//! session owns the compiler (its database, the queries and what one build
//! computes). Nothing below the session imports a study.

pub mod fit_probing;
pub mod layout_search;
