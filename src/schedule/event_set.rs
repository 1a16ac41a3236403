//! A set of non-negative events, one bit per event: the placer asks
//! whether an event is taken (a receive control, the first events of a
//! send) once per candidate start and receiver, so membership is a shift
//! and a mask rather than a search. It owns nothing but the bits; which
//! events go in is the placer's.

/// Events as bits of 64-event words, grown as larger events are added.
#[derive(Clone, Default, Debug)]
pub struct EventSet {
    words: Vec<u64>,
}

impl EventSet {
    /// Whether `event` is in the set (never, for a negative event).
    pub fn contains(&self, event: i64) -> bool {
        if event < 0 {
            return false;
        }
        let event = event as u64;
        self.words
            .get((event / 64) as usize)
            .is_some_and(|word| word >> (event % 64) & 1 == 1)
    }

    /// Adds `event`, which must not be negative.
    pub fn insert(&mut self, event: i64) {
        debug_assert!(event >= 0, "an event set holds no negative event");
        let event = event.max(0) as u64;
        let index = (event / 64) as usize;
        if index >= self.words.len() {
            self.words.resize(index + 1, 0);
        }
        self.words[index] |= 1 << (event % 64);
    }
}

#[cfg(test)]
mod tests {
    use super::EventSet;

    #[test]
    fn holds_exactly_the_events_added() {
        let mut set = EventSet::default();
        let added = [0i64, 1, 63, 64, 65, 200, 4_097, 70_000];
        for &event in added.iter().rev() {
            set.insert(event);
        }
        for event in -3..71_000 {
            assert_eq!(set.contains(event), added.contains(&event), "{event}");
        }
    }
}
