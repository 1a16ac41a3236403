//! `superstep replay`: build, then replay every exchange phase from its
//! decoded rows and check the delivered words.

use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::session::replay::replay_all;
use crate::text::thousands;

/// The flags of `superstep replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// Words checked per phase (a deterministic sample); 0 checks every word.
    #[arg(long, value_name = "WORDS", default_value_t = 8192)]
    pub sample: u64,
}

pub fn run(arguments: &ReplayArguments) -> Result<(), CommandError> {
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    build_checked(&mut session, &query, &arguments.query)?;
    finish_cache(session.cache());
    let started = Instant::now();
    let sample = (arguments.sample > 0).then_some(arguments.sample);
    let replays = replay_all(&session, sample);
    let mut failures = 0;
    let (mut deliveries, mut words) = (0u64, 0u64);
    for replay in &replays {
        match &replay.result {
            Ok(report) => {
                deliveries += report.deliveries;
                words += report.checked_words;
                if !super::progress::quiet() {
                    print_line!(
                        "  {:<48} PASS  {:>9} deliveries, {:>10} words checked",
                        replay.key,
                        thousands(report.deliveries),
                        thousands(report.checked_words)
                    );
                }
            }
            Err(error) => {
                failures += 1;
                print_line!("  {:<48} FAIL  {error}", replay.key);
            }
        }
    }
    print_line!(
        "replayed {} phases of {}{}: {} deliveries, {} words checked, {} failed",
        replays.len(),
        query.name,
        super::progress::timing(format_args!(" in {:.3} s", started.elapsed().as_secs_f64())),
        thousands(deliveries),
        thousands(words),
        failures
    );
    if failures > 0 {
        return Err(CommandError::Internal(format!(
            "{failures} phases failed replay"
        )));
    }
    Ok(())
}
