//! When one tile is busy within an exchange phase, read from its schedule:
//! the window from its first send to the end of its last, and from its
//! first receive select to the end of its last payload, in events from the
//! phase's start, with the words moved. For timelines and reports; it
//! judges nothing.

use super::{ExchangeProblem, Schedule};

/// A half-open window of events, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Window {
    pub start: u32,
    pub end: u32,
}

impl Window {
    fn widen(window: Option<Window>, start: u32, end: u32) -> Option<Window> {
        Some(match window {
            Some(window) => Window {
                start: window.start.min(start),
                end: window.end.max(end),
            },
            None => Window { start, end },
        })
    }
}

/// One tile's activity in one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TileActivity {
    pub send: Option<Window>,
    pub receive: Option<Window>,
    pub words_sent: u64,
    pub words_received: u64,
}

/// Events a piece of `words` words occupies (paired items move two words).
fn piece_events(words: u32, paired: bool) -> u32 {
    if paired { words.div_ceil(2) } else { words }
}

/// The activity of every tile in `tiles` (others are skipped), in the
/// order given.
pub fn tile_activity(
    problem: &ExchangeProblem,
    schedule: &Schedule,
    tiles: &[u32],
) -> Vec<TileActivity> {
    let mut activity = vec![TileActivity::default(); tiles.len()];
    let slot = |tile: u32| tiles.iter().position(|&wanted| wanted == tile);
    for piece in 0..problem.pieces() {
        let words = problem.words[piece];
        let paired = schedule.paired.get(piece).copied().unwrap_or(false);
        let events = piece_events(words, paired);
        if let Some(index) = slot(problem.source_tile[piece]) {
            let start = schedule.send_start[piece];
            let entry = &mut activity[index];
            entry.send = Window::widen(entry.send, start, start.saturating_add(events));
            entry.words_sent += u64::from(words);
        }
        for receive in problem.receives_of(piece) {
            if let Some(index) = slot(problem.destination_tile[receive]) {
                let start = schedule.select[receive];
                let end = schedule.payload_start[receive].saturating_add(events);
                let entry = &mut activity[index];
                entry.receive = Window::widen(entry.receive, start, end);
                entry.words_received += u64::from(words);
            }
        }
    }
    activity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::SchedulePolicy;
    use crate::schedule::TransferWidth;
    use crate::schedule::tests::random_problem;

    #[test]
    fn windows_cover_every_send_and_receive_of_the_tile() {
        let problem = random_problem(11, 8, 40);
        let schedule =
            crate::schedule::schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32)
                .expect("schedules");
        let tiles: Vec<u32> = (0..8).collect();
        let activity = tile_activity(&problem, &schedule, &tiles);
        let sent: u64 = activity.iter().map(|tile| tile.words_sent).sum();
        let total: u64 = problem.words.iter().map(|&words| u64::from(words)).sum();
        assert_eq!(sent, total);
        for piece in 0..problem.pieces() {
            let tile = problem.source_tile[piece] as usize;
            let window = activity[tile].send.expect("the source sends");
            assert!(window.start <= schedule.send_start[piece]);
            assert!(window.end >= schedule.send_start[piece] + problem.words[piece]);
            for receive in problem.receives_of(piece) {
                let tile = problem.destination_tile[receive] as usize;
                let window = activity[tile].receive.expect("the destination receives");
                assert!(window.start <= schedule.select[receive]);
                assert!(window.end <= schedule.horizon + problem.words[piece]);
            }
        }
        // Tiles not asked for are skipped; order follows the request.
        let two = tile_activity(&problem, &schedule, &[3, 1]);
        assert_eq!(two, vec![activity[3], activity[1]]);
    }
}
