//! `--write-overrides FILE`: a selection as `[[schedule.override]]` entries
//! (phase, policy and width) that the build-file parser accepts, to append
//! to a build file that does not already override those phases.

use std::fmt::Write;

use crate::studies::sweep::Selection;
use crate::target::costs::cycles_to_ms;
use crate::text::thousands;

/// The TOML fragment of `selection` for the build `name`.
pub fn overrides_fragment(name: &str, selection: &Selection) -> String {
    let quoted = |text: &str| toml::Value::String(text.to_string()).to_string();
    let saving = selection.saving_cycles();
    let mut text = format!(
        "# superstep sweep {name}: selection {}.\n\
         # {} phases overridden; predicted saving {} cycles ({:.4} ms at 1.5 GHz), weighted by executions.\n\
         # Append to the build file (which must not already override these phases).\n",
        selection.rule.describe(),
        selection.chosen().count(),
        thousands(saving),
        cycles_to_ms(saving)
    );
    for (phase, chosen) in selection.chosen() {
        let _ = write!(
            text,
            "\n# saves {} cycles ({} -> {} per execution x {})\n\
             [[schedule.override]]\nphase = {}\npolicy = {}\nwidth = {}\n",
            thousands(chosen.saving_cycles),
            thousands(chosen.built_cycles),
            thousands(chosen.cycles),
            phase.executions,
            quoted(&phase.key),
            quoted(&chosen.config.policy.to_string()),
            quoted(chosen.config.width.name())
        );
    }
    text
}
