//! The one table of build-file fields: every key a build file (and `--set`)
//! may name, with the build input it lands in (and so its durability), how
//! its resolved value is read from the typed query (`BuildQuery`), its
//! kind, default, allowed values and meaning. The salsa inputs take their
//! durabilities from it and `watch` its input names. The
//! schema's key lists (`schema::keys_of`, which `--set` and the unknown-key
//! errors read) are made from it, validation takes each choice field's
//! accepted names from it, the settings a rebuild compares
//! (`settings::query_settings`) are its fields' readers run on a query, and
//! the build-file reference (`docs/build-file.md`) is rendered from it
//! (`field_reference`); tests hold that every listed choice passes
//! validation and that the reference is current, and the crate does not
//! compile when a field that lands in a build input has no reader.
//!
//! `vocabulary` says what a field is, `table` holds them all (`FIELDS`);
//! this module looks keys up (`field_of`, `known`, `table_and_name`).

mod table;
mod vocabulary;

pub use table::FIELDS;
pub use vocabulary::{
    Durability, Field, Input, KeyKind, LAYOUT_OVERRIDE_PREFIX, MATRIX_INPUTS_BY_OP_PREFIX,
    MATRIX_INPUTS_OVERRIDE_PREFIX, PHASE_OVERRIDE_PREFIX, Reader,
};

/// The field whose key is `key` (for an array of tables' entries, its
/// member's key, e.g. `schedule.override.policy`).
pub fn field_of(key: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|field| field.key == key)
}

/// The table's own `key`, for code that names a field (a diagnostic's
/// field, a `--set` origin): used in a constant
/// (`const KEY: &str = known("workload.heads");`), a key the table lacks
/// fails to compile.
pub const fn known(key: &str) -> &'static str {
    let mut index = 0;
    while index < FIELDS.len() {
        if same_text(FIELDS[index].key, key) {
            return FIELDS[index].key;
        }
        index += 1;
    }
    panic!("the key is not one of the build file's table of fields (build_file::fields::FIELDS)")
}

/// `left == right`, in a constant.
const fn same_text(left: &str, right: &str) -> bool {
    let (left, right) = (left.as_bytes(), right.as_bytes());
    if left.len() != right.len() {
        return false;
    }
    let mut index = 0;
    while index < left.len() {
        if left[index] != right[index] {
            return false;
        }
        index += 1;
    }
    true
}

/// The table a field's key sits in (`""` at the top level) and its name.
pub fn table_and_name(key: &str) -> (&str, &str) {
    key.rsplit_once('.').unwrap_or(("", key))
}
