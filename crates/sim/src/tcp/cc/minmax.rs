//! Windowed running maximum as Linux's lib/win_minmax.c (Kathleen Nichols' algorithm): the best,
//! second-best and third-best samples of the window, each from a later part of it, so that when
//! the best ages out the next one is already known. O(1) per sample, three samples of memory.
//! BBR's bandwidth filter runs it over packet-timed rounds (`t` = round count, window 10).

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Sample {
    t: u64,
    v: u64,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct MinMax {
    s: [Sample; 3],
}

impl MinMax {
    /// `minmax_get`: the windowed maximum.
    pub fn get(&self) -> u64 {
        self.s[0].v
    }

    /// `minmax_reset`: forget everything, `v` at `t` is the only sample.
    pub fn reset(&mut self, t: u64, v: u64) {
        self.s = [Sample { t, v }; 3];
    }

    /// `minmax_running_max`: add `v` measured at `t` to a window of `win`.
    pub fn running_max(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let val = Sample { t, v };
        if v >= self.s[0].v || t.saturating_sub(self.s[2].t) > win {
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    /// `minmax_subwin_update`: age the choices as the window moves.
    fn subwin_update(&mut self, win: u64, val: Sample) -> u64 {
        let dt = val.t.saturating_sub(self.s[0].t);
        if dt > win {
            // The best left the window: promote the others (twice if the second is stale too).
            self.s = [self.s[1], self.s[2], val];
            if val.t.saturating_sub(self.s[0].t) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            // A quarter of the window without a new second choice: take one from it.
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_holds_for_the_window_then_the_runner_up_takes_over() {
        let mut m = MinMax::default();
        m.reset(0, 0);
        assert_eq!(m.running_max(10, 0, 100), 100);
        // Lower samples at rounds 1..=10 keep 100 (its age ≤ 10).
        for t in 1..=10 {
            assert_eq!(m.running_max(10, t, 50 + t), 100, "round {t}");
        }
        // The rising samples 53..60 became the second/third choices (the second is taken after
        // a quarter window, round 3, then each larger one replaces it): at round 11 the 100 of
        // round 0 is 11 rounds old and the second choice, 60 from round 10, takes over.
        assert_eq!(m.running_max(10, 11, 40), 60);
        // A new maximum replaces everything at once.
        assert_eq!(m.running_max(10, 12, 500), 500);
    }
}
