//! Every exchange phase of the small builds replays from its decoded rows
//! and delivers every word, under each policy and width.

use crate::common;

use common::query;
use superstep::session::Session;
use superstep::session::replay::replay_all;

fn replay(sets: &[&str]) {
    let mut session = Session::new(&query("queries/vit-tiny.toml", sets));
    let outcome = session.build().expect("build");
    let replays = replay_all(&session, None);
    assert_eq!(
        replays.len(),
        outcome.back.as_ref().expect("back half").phases.len()
    );
    let mut words = 0;
    for replay in &replays {
        match &replay.result {
            Ok(report) => words += report.checked_words,
            Err(error) => panic!("{sets:?}: phase {} failed replay: {error}", replay.key),
        }
    }
    assert!(words > 0);
}

#[test]
fn every_phase_replays_under_each_policy() {
    for sets in [
        &["schedule.policy=latency"][..],
        &["schedule.policy=S64"],
        &["schedule.policy=B256"],
        &["schedule.policy=B1024", "schedule.width=paired64"],
        &["schedule.policy=latency", "schedule.width=paired64"],
    ] {
        replay(sets);
    }
}

#[test]
fn every_phase_of_other_shapes_replays() {
    replay(&["workload.batch=2", "workload.attention=flash"]);
    replay(&[
        "workload.patches=256",
        "workload.heads=2",
        "workload.width=128",
        "workload.mlp=256",
        "machine.tiles=64",
    ]);
}
