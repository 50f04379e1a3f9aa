//! The adaptive concurrency limit of one cluster: a delay-based controller on the upstream's
//! latency (TCP Vegas's idea, applied to requests in flight). The process's workers share one
//! (see [`super::controller`]), which sees all their requests.
//!
//! Every window (at least 5 samples and at least one baseline latency long, or as soon as the
//! mean latency has doubled) the mean upstream latency of the window is compared with the
//! no-load baseline. By Little's law, of the requests in flight the share `baseline / mean` is
//! being served and the rest queues at the upstream; the controller keeps that queue near zero:
//!
//! - latency above `baseline * (1 + tolerance)` and at least half a request queued on average:
//!   the limit becomes what the upstream serves at once, its throughput in the window times the
//!   baseline (a small queue takes one off at most); a window closes early when
//!   latency doubled, so an overload starting or the upstream's capacity falling is met within
//!   one no-load latency;
//! - latency near the baseline and the window filled the limit: the limit grows, by half in slow
//!   start (until the first cut) and by a tenth (at least one) after that; after a probe upwards that
//!   failed at once it holds for a few windows first, longer each time in a row (4, 8, then 16
//!   windows), so that a limit sitting at the upstream's capacity spends little time above it
//!   (after other cuts, one window);
//! - a limit twice the recent peak in flight is no evidence for it: the limit decays towards
//!   twice that peak (a limit the traffic never validated is not kept for the next burst), and
//!   slow start resumes.
//!
//! After the limit moves, the next window only waits (its requests were admitted before the
//! move), unless latency doubled. The limit stays within `min_limit..=max_limit`. At equilibrium the upstream runs at its
//! capacity, and one above it for one window out of every few.
//!
//! The baseline is the lowest window mean seen; because a loaded upstream never shows its no-load
//! latency again, it is re-measured every `probe_interval` by halving the limit for one window
//! (taking that window's mean as the new baseline, so it can also rise when the upstream got
//! slower). The probe's window counts only the requests sent after it began, and lasts until
//! it has enough of them: those sent before were admitted at the full limit, and when the
//! upstream's capacity has just fallen they queued there (a pool halved as a probe began gave
//! it 80 ms for 40, and the limit stayed at twice the capacity). A probe falls due only where
//! the limit binds; where the limit (nearly) never bound since the last re-measure, the
//! latencies of those windows are the re-measure instead, even when the window that finds the
//! probe due binds (the load just stepped up: the worst moment to halve the limit). Pure
//! arithmetic on explicit instants: deterministic and unit-tested.
//!
//! Latency that rises is not always queueing, and a healthy upstream must not be shed for it:
//!
//! - **Only a limit that binds moves down.** A window in which every request found a slot under
//!   the limit says nothing about the limit: its latency, however high, is not cut for (with an
//!   open-loop load the requests in flight follow the latency, not the other way round).
//! - **Queueing is latency that follows the requests in flight.** At an upstream that queues
//!   (a fixed pool of workers, FIFO behind), latency beyond the pool grows in proportion to the
//!   requests in flight: one more request in flight is one more request waiting, and throughput
//!   stays flat. At an upstream whose latency merely grows with load (say 20 ms + 0.2 ms per
//!   request in flight) it grows far less than in proportion, and more in flight still buys
//!   throughput. The controller measures which it is from the moves of in flight: between
//!   consecutive windows with latency risen, the log-log slope of mean latency over average
//!   in flight (the elasticity), an exponentially weighted least-squares estimate over the
//!   last few moves, with a small prior towards 1 (queueing) until moves show otherwise. Only
//!   windows with latency risen are points of that curve (below the rise, at a pool with free
//!   workers, latency does not depend on in flight at all): windows held at the limit (so the
//!   requests in flight were set by it), and windows in which the limit did not bind and had
//!   not just been cut (in flight set by the load: a step of the load is a move too, and
//!   latency that follows in flight because the upstream slowed down reads as queueing, the
//!   safe side). A steady load teaches nothing (its windows move in flight by less than 5%),
//!   so the first windows at the limit after a step of the load are judged against the last
//!   window before it, and that point outlives a probe (its latency taken against the new
//!   baselines); otherwise the prior took them for queueing and cut the limit by one request
//!   per move, too little to outweigh it, for about a second. Latency above the tolerance
//!   counts as queueing when that elasticity is at least 0.4, or when latency is above 1.5
//!   times the baseline whatever the estimate says (it comes from a few moves and can be
//!   wrong: this bounds what trusting it costs). Latency risen without queueing lets a binding
//!   limit grow by a tenth per window.
//! - **A limit at rest stays above the load's swings.** An unused limit decays towards twice
//!   the recent peak of requests in flight (each window's most, forgotten by 2% per window), not
//!   twice the last window's, and one at rest below twice that peak (where slow start or a cut
//!   left it) grows towards it by a tenth per window while nothing queues, so that a steady
//!   load's ordinary swings, and a doubling of it, find room; growth after the first cut is a
//!   tenth of the limit per window (at least one).
//! - **Each route has its own no-load latency.** A cluster serving long and short requests
//!   (a report route of 700 ms and an item route of 1 ms) sees its mean latency and its requests
//!   in flight grow together when the long ones become more frequent, as if they queued. So
//!   every sample names its kind (a key of its route), each kind keeps its own baseline (the
//!   lowest mean of its samples, gathered over windows until there are five), and a window's
//!   ratio is its latencies over the sum of their kinds' baselines; the baseline Little's law
//!   and the window length use is that sum per request, the window's mix. A change of mix
//!   moves both alike; queueing raises the first only. A probe, or a window at the minimum
//!   limit, re-measures a kind from its own samples when the window holds at least five of
//!   them, else scales its baseline by the window's ratio (the upstream got slower or faster
//!   for all kinds alike; one or two samples of a kind are noise). Kinds within one route are not told
//!   apart (a cache in front of an application looks like one route, whose fast answers must
//!   not hide the application's queue).
//! - **Noise is not a baseline.** The baseline is the lowest window mean plus two standard errors
//!   of that mean, so that the lowest of many noisy means (p99 three times p50) is not taken for
//!   the no-load latency. Should luck still set it too low (a first window of a few samples),
//!   every window looks queued and the limit falls to `min_limit`; a window there that still
//!   looks queued is as unloaded as the limit can make it, so its mean becomes the baseline
//!   (as a probe's would) and the limit grows again, rather than waiting for the next probe.
//!   The lowest of many candidates is still luck, and the lowest only ever lowers the
//!   baseline; a probe, which can raise it, waits for the limit to bind. At a noisy upstream
//!   whose limit does not bind, the baseline sank within seconds to about 0.7 times the mean
//!   latency (in the real noisy benchmark: 14-16 ms for a mean of 22), every window read as
//!   risen, the limit at rest stopped growing towards twice the peak, and the first window
//!   that bound after the load doubled (1.6 times that baseline) was taken for queueing. So
//!   while the limit does not bind a candidate takes 64 samples, not 5, and when a probe is
//!   due and the limit bound in at most a tenth of the windows since the last re-measure, each
//!   kind's baseline becomes the mean of its samples in the windows the limit did not bind
//!   (the load set their in flight: that is the upstream's latency at that load). While the
//!   limit binds nothing changed: candidates of 5 samples (a pool's latency never goes below
//!   its no-load latency) and probes.
//!
//! Measured in the open-loop simulations of `super::sim` (requests refused at the limit, what the last
//! class sees): an upstream whose latency is 20 ms + 0.2 ms per request in flight, at twice its
//! usual load, 0.1-0.2% refused (the controller without the elasticity: 55-60% at its usual
//! load); a noisy upstream (log-normal, p99 = 3 x p50), 0.1% at twice its usual load (before:
//! 90%); a pool of 8 x 40 ms at three times its capacity, goodput within 5% of capacity and p99
//! 1.3-1.85x the service time, the onset included (before: under 1.6x).

use std::time::{Duration, Instant};

use gateway_config::AdaptiveConcurrency;

/// Minimum samples per window.
const MIN_SAMPLES: u32 = 5;
/// Samples behind each candidate for a measured kind's baseline (a kind not measured yet takes
/// its first at [`MIN_SAMPLES`]) while the limit does not bind. The baseline is the lowest
/// candidate: of many means of a few noisy samples, the lowest is far below the no-load latency
/// (at an upstream with p99 three times p50, the lowest of a few hundred 10-sample means is
/// about 0.7 times the mean; of 32-sample means over 5 s at 1000 req/s, 0.89 times; of
/// 64-sample means, above 0.9 times).
const CANDIDATE_SAMPLES: u32 = 64;
/// Of the windows since the last re-measure, the share in which the limit did not bind for
/// their latencies to re-measure the baselines when a probe is due (see
/// [`Gradient::remeasure_unbound`]).
const UNBOUND_SHARE: f64 = 0.9;
/// The fewest windows such a re-measure looks back over.
const UNBOUND_WINDOWS: u32 = 20;
/// Minimum window length when no baseline is known yet.
const MIN_WINDOW: Duration = Duration::from_millis(20);
/// Requests queued upstream (on average over a window) that count as queueing: less is noise
/// in a mean of a few samples.
const MIN_QUEUE: f64 = 0.5;
/// Standard errors of a window's mean added to it when it is taken as the baseline.
const NOISE_SE: f64 = 2.0;
/// Elasticity of latency over in flight (log-log slope) from which a rise is queueing.
const QUEUEING_ELASTICITY: f64 = 0.4;
/// Weight of each earlier move in the elasticity estimate (per move since).
const ELASTICITY_DECAY: f64 = 0.8;
/// The prior of the elasticity estimate: elasticity 1 (queueing), as much evidence as one move
/// of about 7% in flight.
const ELASTICITY_PRIOR: f64 = 0.01;
/// Latency above this multiple of the baseline is queueing whatever the elasticity says (an
/// estimate from a few moves can be wrong; this bounds what trusting it can cost).
const INELASTIC_MAX_RATIO: f64 = 1.5;
/// The smallest move of in flight (log) between two points of the latency curve that teaches
/// the elasticity anything.
const MIN_MOVE: f64 = 0.05;
/// How fast the recent peak of requests in flight is forgotten, per window (about one second
/// at windows of 20 ms): an unused limit decays to twice that peak, so that the ordinary
/// swings of a steady load (and a doubling of it) stay under the limit.
const PEAK_DECAY: f64 = 0.98;
/// Windows without growth after a probe upwards that failed at once (doubled for each such
/// probe in a row, up to 4x); one window after any other cut.
const HOLD_WINDOWS: u32 = 4;
const MAX_HOLD_SHIFT: u32 = 2;
/// Kinds of request told apart (routes of the cluster); samples of further ones count towards
/// the window and its throughput but not its latency.
const MAX_KINDS: usize = 64;
/// Probe intervals after which a kind not seen since is forgotten (a route removed or renamed
/// by a reload: the controller outlives reloads that keep the cluster's settings).
const FORGET_PROBES: u32 = 10;

/// One kind of request of a cluster (a route): its own no-load latency, so that a cluster
/// serving long and short requests alike is judged by how each kind's latency moves, and a
/// shift of its mix towards the long ones is not read as queueing.
#[derive(Debug, Clone, Default)]
struct Kind {
    /// Which kind (a hash of the route's name: stable across reloads).
    key: u64,
    /// The kind's no-load latency, once measured.
    baseline: Option<Duration>,
    /// Samples towards the kind's next baseline candidate, kept across windows until there are
    /// [`MIN_SAMPLES`] (a slow kind completes less than once per window): count, sum and sum
    /// of squares (seconds).
    n: u32,
    sum: f64,
    sum_sq: f64,
    /// This window's samples of the kind: count and sum of latencies (nanoseconds).
    window_n: u32,
    window_nanos: u128,
    /// Samples of the kind in windows the limit did not bind since the last re-measure: count
    /// and sum (seconds).
    unbound_n: u32,
    unbound_sum: f64,
    /// When the kind was last sampled.
    seen: Option<Instant>,
}

impl Kind {
    /// The mean of this window's samples.
    fn window_mean(&self) -> Option<Duration> {
        (self.window_n > 0).then(|| nanos(self.window_nanos / u128::from(self.window_n)))
    }

    /// Re-measures the kind's baseline from this window (a probe, or the limit at its minimum),
    /// starting its next candidate afresh: its own mean when the window holds enough of its
    /// samples (or it had no baseline), else its baseline times `ratio`, the window's latency
    /// over the baselines of all its samples (a few samples of one kind are noise; the
    /// upstream got slower or faster for all kinds alike).
    fn remeasure(&mut self, ratio: Option<f64>) {
        if self.window_n == 0 {
            // Not in this window: nothing to re-measure it from.
            return;
        }
        let own = self.window_mean().filter(|_| self.window_n >= MIN_SAMPLES || self.baseline.is_none());
        let scaled = || Duration::try_from_secs_f64(self.baseline?.as_secs_f64() * ratio?).ok();
        if let Some(b) = own.or_else(scaled) {
            self.baseline = Some(b);
            (self.n, self.sum, self.sum_sq) = (0, 0.0, 0.0);
        }
    }

    /// Re-measures the kind's baseline from its samples in the windows the limit did not bind
    /// since the last re-measure (their mean), when there are enough of them.
    fn remeasure_unbound(&mut self) {
        if self.unbound_n >= CANDIDATE_SAMPLES {
            let mean = self.unbound_sum / f64::from(self.unbound_n);
            if let Ok(b) = Duration::try_from_secs_f64(mean) {
                self.baseline = Some(b);
                (self.n, self.sum, self.sum_sq) = (0, 0.0, 0.0);
            }
        }
        (self.unbound_n, self.unbound_sum) = (0, 0.0);
    }

    /// Lowers the baseline to the candidate of the samples gathered since the last one (their
    /// mean, less sure the noisier they were) once there are enough of them, or at once for a
    /// kind not measured yet when `first` (no kind of the cluster is). A kind first measured
    /// while the others' latency is `ratio` times their baselines (a queue) takes its candidate
    /// divided by that ratio: its samples waited in the same queue.
    fn settle_candidate(&mut self, first: bool, ratio: Option<f64>, enough: u32) {
        let enough = if self.baseline.is_some() { enough } else { MIN_SAMPLES };
        if self.n == 0 || (self.n < enough && !(first && self.baseline.is_none())) {
            return;
        }
        let n = f64::from(self.n);
        let mean = self.sum / n;
        let variance = (self.sum_sq / n - mean * mean).max(0.0) * n / (n - 1.0).max(1.0);
        let mut candidate = mean + NOISE_SE * (variance / n).sqrt();
        if self.baseline.is_none() {
            candidate /= ratio.unwrap_or(1.0).max(1.0);
        }
        let candidate = Duration::try_from_secs_f64(candidate).unwrap_or(Duration::MAX);
        self.baseline = Some(self.baseline.map_or(candidate, |b| b.min(candidate)));
        (self.n, self.sum, self.sum_sq) = (0, 0.0, 0.0);
    }
}

/// A window's latency against its requests' no-load latencies (their kinds' baselines).
struct WindowRatio {
    /// Latency over no-load latency, over the samples of measured kinds.
    ratio: f64,
    /// Their no-load latency per request: the window's mix.
    mix: Duration,
    /// The sum of their no-load latencies (seconds): over the window's span, what the upstream
    /// served at once (Little's law).
    work: f64,
}

/// A point of the latency curve (ln in flight, ln latency over the window's no-load latency
/// `before`) against the window's no-load latency `after` the baselines were re-measured; `None`
/// when either is unknown.
fn rebased(point: Option<(f64, f64)>, before: Option<Duration>, after: Option<Duration>) -> Option<(f64, f64)> {
    match (point, before, after) {
        (Some((x, y)), Some(before), Some(after)) if !after.is_zero() => {
            Some((x, y + (before.as_secs_f64() / after.as_secs_f64()).ln()))
        }
        _ => None,
    }
}

/// The kind key of a route (FNV-1a of its name): the same across reloads, so a route keeps its
/// no-load latency while its place in the route table moves.
pub fn kind_key(route: &str) -> u64 {
    route.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[derive(Debug, Clone)]
pub struct Gradient {
    settings: AdaptiveConcurrency,
    max_limit: f64,
    limit: f64,
    /// The no-load latency of the last window's mix of kinds (each kind's baseline, weighted by
    /// its samples in the window).
    baseline: Option<Duration>,
    /// Each kind's baseline and samples (see [`Kind`]).
    kinds: Vec<Kind>,
    window_start: Instant,
    samples: u32,
    /// This window's count and latencies of the samples whose kind had a baseline, and the sum
    /// of those baselines (nanoseconds): has latency doubled already?
    known: u32,
    known_nanos: u128,
    expected_nanos: u128,
    max_in_flight: usize,
    /// The most in flight lately: each window's most, decaying by [`PEAK_DECAY`] per window.
    peak: f64,
    /// A request found no slot under the limit in this window.
    bound: bool,
    /// ln(average in flight) and ln(mean latency) of the last point of the latency curve.
    last_bound: Option<(f64, f64)>,
    /// Exponentially weighted sums of the elasticity's least squares (dx² and dx·dy).
    sxx: f64,
    sxy: f64,
    /// Sum and count of the in-flight numbers seen at admissions in this window (the average
    /// in flight when nobody reports every change).
    in_flight_sum: u64,
    in_flight_count: u32,
    /// Time-weighted in flight, from [`Gradient::set_in_flight`]: the current number, since
    /// when, and the integral over this window (requests x nanoseconds).
    current: usize,
    changed: Instant,
    area: u128,
    tracked: bool,
    probing: bool,
    next_probe: Instant,
    slow_start: bool,
    /// Windows left without growth.
    hold: u32,
    /// Windows since the limit last grew (saturating).
    since_growth: u32,
    /// Probes upwards in a row that were cut at once.
    failed_probes: u32,
    /// The limit just moved: the next window's samples were admitted before, so it only waits.
    settling: bool,
    /// The last window's latency was above the baseline's tolerance: requests queue upstream.
    queueing: bool,
    /// The last window's latency over its no-load latency (1 until one closed, and after the
    /// no-load latency was re-measured from a window: a probe, or the limit at its minimum).
    ratio: f64,
    /// Windows closed since the baselines were last re-measured, and of those, windows in which
    /// the limit did not bind.
    since_remeasure: u32,
    unbound_windows: u32,
}

impl Gradient {
    pub fn new(settings: &AdaptiveConcurrency, max_limit: usize, now: Instant) -> Self {
        let max_limit = max_limit.max(1) as f64;
        Self {
            limit: (settings.initial_limit as f64).clamp(1.0, max_limit),
            settings: settings.clone(),
            max_limit,
            baseline: None,
            kinds: Vec::new(),
            window_start: now,
            samples: 0,
            known: 0,
            known_nanos: 0,
            expected_nanos: 0,
            max_in_flight: 0,
            peak: 0.0,
            bound: false,
            last_bound: None,
            sxx: 0.0,
            sxy: 0.0,
            in_flight_sum: 0,
            in_flight_count: 0,
            current: 0,
            changed: now,
            area: 0,
            tracked: false,
            probing: false,
            next_probe: now + settings.probe_interval,
            slow_start: true,
            hold: 0,
            since_growth: u32::MAX,
            failed_probes: 0,
            settling: false,
            queueing: false,
            ratio: 1.0,
            since_remeasure: 0,
            unbound_windows: 0,
        }
    }

    /// The current limit (whole requests, at least `min_limit`).
    pub fn limit(&self) -> usize {
        let limit = if self.probing { (self.limit / 2.0).max(self.settings.min_limit as f64) } else { self.limit };
        limit.floor().max(1.0) as usize
    }

    /// Whether the upstream's latency has been measured (a window closed). Before that the
    /// limit is `initial_limit`, a guess: refusing a burst for it would shed requests a healthy
    /// upstream serves, so the limiter gives such a limit room (see
    /// [`super::limiter::UNVALIDATED_ROOM`]).
    pub fn measured(&self) -> bool {
        self.baseline.is_some()
    }

    /// Takes `baseline` as measured (tests of the limiter at a measured limit).
    #[cfg(test)]
    pub fn assume_measured(&mut self, baseline: Duration) {
        self.baseline = Some(baseline);
        if self.kinds.is_empty() {
            self.kinds.push(Kind::default());
        }
        if let Some(k) = self.kinds.first_mut() {
            k.baseline = Some(baseline);
        }
    }

    /// The kinds of request seen, with each one's no-load latency once measured (tests).
    #[cfg(test)]
    pub fn kinds(&self) -> Vec<(u64, Option<Duration>)> {
        self.kinds.iter().map(|k| (k.key, k.baseline)).collect()
    }

    /// Whether the last window showed requests queueing at the upstream (latency above the
    /// baseline's tolerance): a request sent above the limit now would only queue there too.
    pub fn queueing(&self) -> bool {
        self.queueing
    }

    /// The last window's mean latency over its no-load latency (1 before any window closed):
    /// what being served takes now, in no-load latencies.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The measured no-load latency, once known.
    pub fn baseline(&self) -> Option<Duration> {
        self.baseline
    }

    /// Notes that a request found no slot under the limit (it waits, is shed, or goes above the
    /// limit): the limit binds in this window.
    pub fn note_bound(&mut self) {
        self.bound = true;
    }

    /// The elasticity of latency over requests in flight, as measured from the limit's moves
    /// (1: latency follows in flight, queueing; 0: latency does not depend on it).
    pub fn elasticity(&self) -> f64 {
        (ELASTICITY_PRIOR + self.sxy) / (ELASTICITY_PRIOR + self.sxx)
    }

    /// Notes the concurrency reached (called when a request is admitted).
    pub fn observe_in_flight(&mut self, in_flight: usize) {
        self.max_in_flight = self.max_in_flight.max(in_flight);
        self.in_flight_sum += in_flight as u64;
        self.in_flight_count += 1;
    }

    /// Reports every change of the requests in flight, for a time-weighted average.
    pub fn set_in_flight(&mut self, in_flight: usize, now: Instant) {
        let since = self.changed.max(self.window_start);
        self.area += self.current as u128 * now.saturating_duration_since(since).as_nanos();
        self.current = in_flight;
        self.changed = now;
        self.tracked = true;
    }

    /// The window's average in flight: time-weighted when every change is reported, else the
    /// average seen at admissions, else the limit.
    fn average_in_flight(&self, now: Instant) -> f64 {
        let span = now.saturating_duration_since(self.window_start).as_nanos();
        if self.tracked && span > 0 {
            let since = self.changed.max(self.window_start);
            let area = self.area + self.current as u128 * now.saturating_duration_since(since).as_nanos();
            return area as f64 / span as f64;
        }
        if self.in_flight_count > 0 {
            return self.in_flight_sum as f64 / f64::from(self.in_flight_count);
        }
        self.limit
    }

    /// Adds one successful upstream latency sample of a request of kind 0; see
    /// [`Gradient::sample_kind`].
    pub fn sample(&mut self, rtt: Duration, now: Instant) -> bool {
        self.sample_kind(rtt, 0, now)
    }

    /// Adds one successful upstream latency sample of a request of `kind` (a key of its route,
    /// see [`kind_key`]); may close the window and move the limit (then it returns true). Each
    /// kind's latency is compared with its own no-load latency: a cluster's window is queued
    /// when its requests took longer than their kinds take unloaded, not when more of them are
    /// of a slower kind.
    pub fn sample_kind(&mut self, rtt: Duration, kind: u64, now: Instant) -> bool {
        if self.probing && now.checked_sub(rtt).is_some_and(|sent| sent < self.window_start) {
            // Sent before the probe halved the limit: its latency is the upstream's at the full
            // limit (a queue there, when the upstream's capacity just fell), not at half of it.
            // The probe measures only what it admitted, and lasts until it has enough of that.
            return false;
        }
        let i = match self.kinds.iter().position(|k| k.key == kind) {
            Some(i) => Some(i),
            None if self.kinds.len() < MAX_KINDS => {
                self.kinds.push(Kind { key: kind, ..Kind::default() });
                Some(self.kinds.len() - 1)
            }
            // Beyond the most kinds told apart, a sample counts towards the window only.
            None => None,
        };
        self.samples += 1;
        if let Some(k) = i.and_then(|i| self.kinds.get_mut(i)) {
            let secs = rtt.as_secs_f64();
            k.n += 1;
            k.sum += secs;
            k.sum_sq += secs * secs;
            k.window_n += 1;
            k.window_nanos += rtt.as_nanos();
            k.seen = Some(now);
            if let Some(b) = k.baseline {
                self.known += 1;
                self.known_nanos += rtt.as_nanos();
                self.expected_nanos += b.as_nanos();
            }
        }
        if self.samples < MIN_SAMPLES {
            return false;
        }
        let window = self.baseline.unwrap_or(MIN_WINDOW).max(MIN_WINDOW);
        // A window closes after one baseline latency, or at once when latency has already
        // doubled (an overload starting: shrink now rather than a window later).
        let doubled = self.known >= MIN_SAMPLES && self.known_nanos > 2 * self.expected_nanos && !self.probing;
        if now.saturating_duration_since(self.window_start) < window && !doubled {
            return false;
        }
        self.close_window(now);
        true
    }

    /// The window's latency against its no-load latency, over the samples of the kinds
    /// measured; `None` when fewer than [`MIN_SAMPLES`] of them (too few to judge by).
    fn window_ratio(&self) -> Option<WindowRatio> {
        let (mut actual, mut expected, mut n) = (0u128, 0u128, 0u32);
        for k in &self.kinds {
            if let (Some(b), true) = (k.baseline, k.window_n > 0) {
                actual += k.window_nanos;
                expected += b.as_nanos() * u128::from(k.window_n);
                n += k.window_n;
            }
        }
        (n >= MIN_SAMPLES && expected > 0).then(|| WindowRatio {
            ratio: actual as f64 / expected as f64,
            mix: nanos(expected / u128::from(n)),
            work: expected as f64 * 1e-9,
        })
    }

    /// Takes this window's latencies as the no-load latencies (a probe, or the limit at its
    /// minimum): each kind in it is re-measured (see [`Kind::remeasure`]). Returns the window's
    /// no-load latency before (its mix of the old baselines), when it had enough samples.
    fn remeasure(&mut self) -> Option<Duration> {
        let before = self.window_ratio();
        let ratio = before.as_ref().map(|w| w.ratio);
        for k in &mut self.kinds {
            k.remeasure(ratio);
        }
        self.baseline = self.window_ratio().map(|w| w.mix).or(self.baseline);
        before.map(|w| w.mix)
    }

    fn close_window(&mut self, now: Instant) {
        let binding = self.bound || self.max_in_flight as f64 >= self.limit.floor();
        self.peak = (self.peak * PEAK_DECAY).max(self.max_in_flight as f64);
        if self.probing {
            // The probe window ran at half the limit: its latencies are the new baselines.
            let before = self.remeasure();
            // Routes not seen for a while are gone (removed or renamed by a reload).
            let forget = self.settings.probe_interval * FORGET_PROBES;
            self.kinds.retain(|k| k.seen.is_some_and(|seen| now.saturating_duration_since(seen) < forget));
            self.probing = false;
            self.ratio = 1.0;
            self.next_probe = now + self.settings.probe_interval;
            self.forget_unbound();
            // Its in flight was set by the probe, not by the limit: no point of the latency
            // curve. The last point stays, its latency against the new baselines (a step of
            // the load that finds a probe due is a move to learn from).
            self.last_bound = rebased(self.last_bound, before, self.baseline);
        } else {
            self.since_remeasure = self.since_remeasure.saturating_add(1);
            if !binding {
                // The load set this window's in flight: its latencies are the upstream's at
                // that load, for the next re-measure without a probe.
                self.unbound_windows = self.unbound_windows.saturating_add(1);
                for k in &mut self.kinds {
                    k.unbound_n = k.unbound_n.saturating_add(k.window_n);
                    k.unbound_sum += k.window_nanos as f64 * 1e-9;
                }
            }
            // Each kind's lowest mean seen, less sure the noisier it was.
            let first = self.kinds.iter().all(|k| k.baseline.is_none());
            let before = self.window_ratio().map(|w| w.ratio);
            // While the limit binds, a pool's latency never goes below its no-load latency and
            // a probe's re-measure may have caught a queue: small candidates correct it soon.
            // While it does not, the lowest of many small candidates is luck (see
            // [`CANDIDATE_SAMPLES`]).
            let enough = if binding { MIN_SAMPLES } else { CANDIDATE_SAMPLES };
            for k in &mut self.kinds {
                k.settle_candidate(first, before, enough);
            }
            let Some(WindowRatio { ratio, mix, work }) = self.window_ratio() else {
                // Too few samples of measured kinds (new routes): nothing to judge by.
                self.reset_window(now);
                return;
            };
            self.baseline = Some(mix);
            self.ratio = ratio;
            let doubled = ratio > 2.0;
            let ratio = ratio.max(1e-3);
            let in_flight = self.average_in_flight(now);
            // Requests queued at the upstream, on average, by Little's law.
            let queued = in_flight * (1.0 - 1.0 / ratio);
            let risen = ratio > 1.0 + self.settings.tolerance && (queued >= MIN_QUEUE || ratio > 2.0);
            // A point of the latency curve: latency risen, and either the limit binding and the
            // window's requests all admitted under the current limit (not a window that drains
            // a cut or still carries requests admitted before the limit moved), or the limit
            // not binding and not just cut (the load set in flight).
            let span = now.saturating_duration_since(self.window_start).as_secs_f64().max(1e-6);
            let held = in_flight >= self.limit * 0.9 - 1.0 && in_flight <= self.limit * 1.1 + 1.0;
            let clean = risen && !self.settling && if binding { held } else { self.hold == 0 };
            if clean {
                self.learn_elasticity(in_flight, ratio);
            }
            self.queueing = risen && (ratio > INELASTIC_MAX_RATIO || self.elasticity() >= QUEUEING_ELASTICITY);
            if self.queueing && self.limit <= self.settings.min_limit as f64 {
                // Latency above the baseline with the fewest requests in flight the limit
                // allows: this window is as unloaded as the limit can make it, so the
                // baselines (each kind's lowest window mean seen, which a noisy upstream's
                // luckiest window puts too low) are what is wrong. They are re-measured here,
                // as by a probe; without this, the limit would stay at its minimum until the
                // next probe.
                let _ = self.remeasure();
                self.queueing = false;
                self.ratio = 1.0;
                // The next point of the latency curve is against the new baselines.
                self.last_bound = None;
            }
            // The window after a move only waits, unless latency doubled while its requests
            // were all admitted under the limit (an overload starting; not a queue built
            // before the last cut, still draining).
            if self.settling && !(doubled && in_flight <= self.limit * 1.1 + 1.0) {
                self.settling = false;
            } else {
                let before = self.limit;
                // What the upstream serves at once, by Little's law: its throughput in this
                // window times its no-load latency (unlike in flight / ratio, this does not lag
                // while a queue built before a cut drains).
                let served = work / span;
                self.adjust(ratio, served, binding, risen);
                self.settling = self.limit != before;
            }
            tracing::trace!(
                limit = self.limit,
                ratio,
                in_flight,
                peak = self.peak,
                binding,
                risen,
                queueing = self.queueing,
                elasticity = self.elasticity(),
                hold = self.hold,
                baseline_us = mix.as_micros() as u64,
                "adaptive limit window"
            );
            if now >= self.next_probe {
                let unbound = f64::from(self.unbound_windows) >= UNBOUND_SHARE * f64::from(self.since_remeasure);
                if unbound && self.since_remeasure >= UNBOUND_WINDOWS {
                    // The limit (nearly) never bound since the last re-measure: the load, not
                    // the limit, set what the upstream saw, and its latencies over that time
                    // are what it takes at that load. Also when this window bound: that is a
                    // step of the load (the limit binding for the first time in a while), the
                    // worst moment to halve the limit.
                    self.remeasure_unbound(now);
                } else if binding {
                    // A probe halves the limit; one that does not bind has nothing to
                    // re-measure (and halving it could shed what the upstream serves well):
                    // it waits.
                    self.probing = true;
                } else if !unbound {
                    // The limit bound too often since the last re-measure (a cold start, a
                    // burst): look back no further than now, and re-measure once enough
                    // windows it did not bind follow.
                    self.forget_unbound();
                }
            }
        }
        self.reset_window(now);
    }

    /// Re-measures the baselines without a probe, when one is due and the limit (nearly) never
    /// bound since the last re-measure: each kind's baseline becomes the mean of its samples in
    /// the windows the limit did not bind (see [`Kind::remeasure_unbound`]).
    ///
    /// The lowest candidate only ever lowers a baseline, and a probe (which can raise it) waits
    /// for the limit to bind; at an upstream whose latency is noisy and whose limit does not
    /// bind, the baseline sank to the luckiest candidate (about 0.7 times the mean latency at p99
    /// three times p50), so that every window read as risen, with the elasticity learned from
    /// in flight that followed latency (Little's law, not queueing). At the first window the
    /// limit bound, latency 1.6 times that baseline was taken for queueing.
    fn remeasure_unbound(&mut self, now: Instant) {
        let before = self.window_ratio().map(|w| w.mix);
        for k in &mut self.kinds {
            k.remeasure_unbound();
        }
        let after = self.window_ratio().map(|w| w.mix);
        self.baseline = after.or(self.baseline);
        tracing::debug!(
            before_us = before.map_or(0, |d| d.as_micros() as u64),
            after_us = after.map_or(0, |d| d.as_micros() as u64),
            windows = self.since_remeasure,
            "adaptive limit: baselines re-measured from the windows the limit did not bind"
        );
        // The last point of the latency curve, against the new baselines.
        self.last_bound = rebased(self.last_bound, before, after).or(self.last_bound);
        self.next_probe = now + self.settings.probe_interval;
        self.forget_unbound();
    }

    /// Starts counting the windows towards the next re-measure afresh.
    fn forget_unbound(&mut self) {
        self.since_remeasure = 0;
        self.unbound_windows = 0;
        for k in &mut self.kinds {
            (k.unbound_n, k.unbound_sum) = (0, 0.0);
        }
    }

    /// Starts the next window at `now`.
    fn reset_window(&mut self, now: Instant) {
        self.window_start = now;
        self.samples = 0;
        self.known = 0;
        self.known_nanos = 0;
        self.expected_nanos = 0;
        for k in &mut self.kinds {
            (k.window_n, k.window_nanos) = (0, 0);
        }
        self.max_in_flight = 0;
        self.bound = false;
        self.in_flight_sum = 0;
        self.in_flight_count = 0;
        self.area = 0;
    }

    /// Adds the move from the last point of the latency curve to this one to the elasticity
    /// estimate. Only points where latency has risen count (below that, at a pool with free
    /// workers, latency does not depend on in flight, which says nothing about what more in
    /// flight does once it rises), and only windows held at the limit (their requests were all
    /// admitted under it, so their latency is the upstream's answer to that many in flight,
    /// not to a queue built before) or not bound by it and not just after a cut (in flight set
    /// by the load).
    fn learn_elasticity(&mut self, in_flight: f64, ratio: f64) {
        if in_flight < 0.5 {
            return;
        }
        let point = (in_flight.ln(), ratio.max(1e-9).ln());
        if let Some((x0, y0)) = self.last_bound {
            let (dx, dy) = (point.0 - x0, point.1 - y0);
            if dx.abs() < MIN_MOVE {
                // Too small a move to tell noise from response: the older point stays.
                return;
            }
            self.sxx = self.sxx * ELASTICITY_DECAY + dx * dx;
            self.sxy = self.sxy * ELASTICITY_DECAY + dx * dy;
        }
        self.last_bound = Some(point);
    }

    /// Moves the limit after one window whose mean latency was `ratio` times the baseline, in
    /// which the upstream served `served` requests at once (throughput x baseline); `binding`:
    /// the limit bound in it; `risen`: latency above the tolerance with requests queued by
    /// Little's law.
    fn adjust(&mut self, ratio: f64, served: f64, binding: bool, risen: bool) {
        let min = self.settings.min_limit as f64;
        self.since_growth = self.since_growth.saturating_add(1);
        if self.since_growth == 3 {
            // The last growth held for two windows: probing upwards works again.
            self.failed_probes = 0;
        }
        let next = if self.queueing && binding {
            // Queueing at the upstream: the limit becomes what it serves at once. A small queue
            // takes at most one off (a window's mean of a few samples is noisy).
            self.cut();
            if ratio > 2.0 || served > self.limit {
                served
            } else {
                served.max(self.limit - 1.0)
            }
        } else if self.peak < self.limit / 2.0 && !self.bound {
            // Unused: decay towards twice the recent peak; slow start again from there.
            self.slow_start = true;
            (self.limit * 0.9).max(2.0 * self.peak)
        } else if binding && risen {
            // Latency rose, but not with the requests in flight: more in flight still buys
            // throughput. Grow by a tenth (not as in slow start: should the estimate be wrong,
            // each step adds little queueing, and the next point of the curve corrects it).
            self.hold = 0;
            self.since_growth = 0;
            self.limit * 1.1 + 1.0
        } else if binding {
            if self.hold > 0 {
                self.hold -= 1;
                self.limit
            } else {
                self.since_growth = 0;
                self.limit + if self.slow_start { (self.limit / 2.0).max(1.0) } else { (self.limit / 10.0).max(1.0) }
            }
        } else if !self.queueing && self.hold == 0 && self.limit < 2.0 * self.peak {
            // At rest below twice the recent peak (where slow start or a cut left it): room for
            // the load's swings and a doubling of it, reached by a tenth per window, as an
            // unused limit decays to it from above.
            (self.limit * 1.1).min(2.0 * self.peak)
        } else {
            self.limit
        };
        self.limit = next.clamp(min, self.max_limit);
    }

    /// Holds growth after a cut: briefly after a disturbance, longer after a probe upwards that
    /// failed at once (the limit was at the upstream's capacity), longer each time in a row.
    fn cut(&mut self) {
        if self.since_growth <= 2 {
            self.failed_probes = (self.failed_probes + 1).min(MAX_HOLD_SHIFT + 1);
            self.hold = HOLD_WINDOWS << (self.failed_probes - 1);
        } else {
            self.hold = 1;
        }
        // Not a growth that held: the probe counter is not reset by the windows that follow.
        self.since_growth = u32::MAX;
        self.slow_start = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AdaptiveConcurrency {
        AdaptiveConcurrency {
            enabled: true,
            initial_limit: 16,
            min_limit: 2,
            tolerance: 0.05,
            probe_interval: Duration::from_secs(10),
        }
    }

    /// An upstream with `capacity` workers of `service` each, FIFO beyond: latency at
    /// concurrency c is `service * max(1, c / capacity)`.
    fn latency(c: usize, capacity: usize, service: Duration) -> Duration {
        service.mul_f64((c as f64 / capacity as f64).max(1.0))
    }

    /// Drives the controller with an upstream kept saturated at its limit.
    fn run(g: &mut Gradient, now: &mut Instant, capacity: usize, service: Duration, windows: usize) {
        for _ in 0..windows * 10 {
            let c = g.limit();
            g.observe_in_flight(c);
            let rtt = latency(c, capacity, service);
            *now += rtt / 5;
            g.sample(rtt, *now);
        }
    }

    #[test]
    fn converges_at_the_upstream_capacity_and_follows_it_down() {
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        // A no-load baseline first (as the unloaded phase of a real run gives).
        for _ in 0..10 {
            now += Duration::from_millis(10);
            g.observe_in_flight(1);
            g.sample(Duration::from_millis(40), now);
        }
        run(&mut g, &mut now, 8, Duration::from_millis(40), 200);
        let limit = g.limit();
        assert!((8..=9).contains(&limit), "limit {limit} for capacity 8");
        // Capacity halves: the limit follows.
        run(&mut g, &mut now, 4, Duration::from_millis(40), 200);
        let limit = g.limit();
        assert!((4..=5).contains(&limit), "limit {limit} for capacity 4");
        assert!(g.baseline().is_some_and(|b| b <= Duration::from_millis(45)), "{:?}", g.baseline());
    }

    #[test]
    fn an_idle_cluster_does_not_inflate_the_limit_and_an_unused_limit_decays() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        for _ in 0..1000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(3);
            g.sample(Duration::from_millis(5), now);
        }
        assert_eq!(g.limit(), 6, "twice what was used, never more than the start");
    }

    #[test]
    fn at_capacity_most_of_the_time_and_a_burst_after_idle_overshoots_little() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        // Light load first: the limit decays to about twice the use.
        for _ in 0..200 {
            now += Duration::from_millis(40);
            g.observe_in_flight(1);
            g.sample(Duration::from_millis(40), now);
        }
        assert!(g.limit() <= 4, "{}", g.limit());
        // Then an upstream of capacity 8 kept saturated: slow start, then at capacity.
        let (mut peak, mut above, mut below, mut total) = (0, 0, 0, 0);
        for i in 0..4000 {
            let c = g.limit();
            g.observe_in_flight(c);
            let rtt = latency(c, 8, Duration::from_millis(40));
            now += rtt / 8;
            g.sample(rtt, now);
            peak = peak.max(c);
            if i >= 400 {
                total += 1;
                above += usize::from(c > 8);
                below += usize::from(c < 8);
            }
        }
        assert!(peak <= 13, "slow start overshoot: peak {peak}");
        assert!(above * 4 < total, "above capacity {above} of {total} samples");
        assert!(below * 10 < total, "below capacity {below} of {total} samples");
    }

    #[test]
    fn stays_within_min_and_max() {
        let mut now = Instant::now();
        // No probing here: a probe would (rightly) accept a uniformly slow upstream as the new baseline.
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 20, now);
        for _ in 0..2000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(g.limit());
            g.sample(Duration::from_millis(1), now);
        }
        assert!(g.limit() <= 20);
        // The upstream gets uniformly 5000 times slower: the limit falls to its minimum, where
        // the slow latency is taken as the new baseline (the fewest requests in flight still
        // see it), and grows again; it never leaves the bounds.
        let (mut lowest, mut highest) = (usize::MAX, 0);
        for _ in 0..2000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(g.limit());
            g.sample(Duration::from_secs(5), now);
            lowest = lowest.min(g.limit());
            highest = highest.max(g.limit());
        }
        assert_eq!(lowest, 2, "down to min_limit");
        assert!(highest <= 20, "{highest}");
        assert_eq!(g.baseline(), Some(Duration::from_secs(5)), "re-measured at the minimum");
    }

    #[test]
    fn a_baseline_measured_too_low_is_corrected_at_the_minimum_limit() {
        // A first window of five lucky samples of a noisy upstream (14 ms, the usual mean being
        // 22 ms) sets the baseline too low: every later window looks queued, and the limit
        // falls. At its minimum the window is as unloaded as the limit can make it: its mean
        // is taken as the baseline, and the limit grows again (before: stuck at the minimum
        // until the next probe, 10 s later).
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        for _ in 0..5 {
            now += Duration::from_millis(5);
            g.observe_in_flight(16);
            g.sample(Duration::from_millis(14), now);
        }
        assert!(g.baseline().is_some_and(|b| b < Duration::from_millis(16)));
        let mut lowest = usize::MAX;
        for _ in 0..2000 {
            // Kept at its limit: a completion every 22 ms / limit.
            let limit = g.limit();
            now += Duration::from_millis(22) / u32::try_from(limit).unwrap_or(1);
            g.observe_in_flight(limit);
            g.sample(Duration::from_millis(22), now);
            lowest = lowest.min(g.limit());
        }
        assert_eq!(lowest, 2, "the limit fell to its minimum");
        assert_eq!(g.baseline(), Some(Duration::from_millis(22)));
        assert!(g.limit() > 8, "and grew again: {}", g.limit());
    }

    /// A controller whose baseline was measured at `baseline` with `in_flight` requests, then,
    /// eleven seconds later, a window in which the limit binds and latency is `rtt` (one sample
    /// every `step`): a probe is due, and starts as that window closes. Returns the controller,
    /// the time and the limit before the probe.
    fn at_a_due_probe(
        baseline: Duration,
        in_flight: usize,
        rtt: Duration,
        step: Duration,
    ) -> (Gradient, Instant, usize) {
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        for _ in 0..10 {
            now += Duration::from_millis(10);
            g.observe_in_flight(in_flight);
            g.sample(baseline, now);
        }
        assert_eq!(g.baseline(), Some(baseline));
        now += Duration::from_secs(11);
        let before = g.limit();
        for _ in 0..5 {
            g.observe_in_flight(in_flight);
            g.note_bound();
            now += step;
            g.sample(rtt, now);
        }
        (g, now, before)
    }

    #[test]
    fn probing_halves_the_limit_for_one_window_and_remeasures_the_baseline() {
        // Eleven seconds later the upstream got slower for good.
        let (mut g, mut now, before) =
            at_a_due_probe(Duration::from_millis(10), 16, Duration::from_millis(20), Duration::ZERO);
        assert!(g.limit() < before, "probe halves the limit");
        for _ in 0..10 {
            now += Duration::from_millis(30);
            g.sample(Duration::from_millis(20), now);
        }
        assert_eq!(g.baseline(), Some(Duration::from_millis(20)), "baseline re-measured upwards");
    }

    #[test]
    fn a_probe_measures_only_the_requests_it_admitted() {
        // A pool of 40 ms whose capacity just halved as a probe starts: the requests sent
        // before the probe queued there and take 80 ms. Their latency is not the upstream's at
        // half the limit; the probe waits for the requests it admitted (40 ms).
        let (mut g, mut now, before) =
            at_a_due_probe(Duration::from_millis(40), 8, Duration::from_millis(40), Duration::from_millis(10));
        let probing = g.limit();
        assert!(probing < before, "the probe halves the limit: {before} -> {probing}");
        // Sent before the probe: 80 ms, queued behind the halved capacity.
        for _ in 0..7 {
            now += Duration::from_millis(10);
            assert!(!g.sample(Duration::from_millis(80), now), "a sample sent before the probe closed it");
        }
        assert_eq!(g.limit(), probing, "the probe lasts until it has samples of its own");
        // Sent after: 40 ms.
        for _ in 0..10 {
            now += Duration::from_millis(10);
            g.sample(Duration::from_millis(40), now);
        }
        assert_eq!(g.baseline(), Some(Duration::from_millis(40)), "the queue is not the no-load latency");
        assert!(g.limit() > probing, "the probe ended");
    }

    #[test]
    fn a_probe_due_at_a_step_of_the_load_re_measures_from_the_windows_before_it() {
        // The limit has not bound for ten seconds (the usual load, 20 ms, 4 in flight), and
        // the first window it binds in (the load doubled) closes when a probe is due. Halving
        // the limit then would refuse what the upstream serves well; the windows before the
        // step measured it already.
        let mut now = Instant::now();
        let start = now;
        let mut g = Gradient::new(&settings(), 1024, now);
        while now < start + Duration::from_millis(9_990) {
            now += Duration::from_millis(5);
            g.observe_in_flight(4);
            g.sample(Duration::from_millis(20), now);
        }
        let before = g.limit();
        assert!(before >= 8, "the limit at rest is above the load: {before}");
        for _ in 0..20 {
            now += Duration::from_millis(5);
            g.observe_in_flight(before);
            g.note_bound();
            g.sample(Duration::from_millis(21), now);
            assert!(g.limit() >= before, "no probe halved the limit at the step: {} of {before}", g.limit());
        }
        let b = g.baseline().unwrap_or_default();
        assert!(b >= Duration::from_millis(19) && b <= Duration::from_millis(21), "baseline {b:?}");
    }

    #[test]
    fn a_shift_of_the_mix_towards_a_slow_route_is_not_queueing() {
        // Two routes to one cluster, 2 ms and 200 ms, every window held at the limit. When the
        // slow route's share grows from 2% to 30%, the mean latency grows 18-fold, but each
        // route's latency stays at its own no-load level: nothing is cut. Judged by the
        // cluster's mean (one kind for both), the same run is cut down to the minimum.
        for kinds in [true, false] {
            let mut now = Instant::now();
            let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
            let mut g = Gradient::new(&no_probe, 1024, now);
            let mut lowest = usize::MAX;
            for i in 0..20_000u32 {
                let slow_every = if i < 5_000 { 50 } else { 3 };
                let slow = i % slow_every == 0;
                now += Duration::from_millis(1);
                g.observe_in_flight(g.limit());
                let (rtt, kind) = if slow { (Duration::from_millis(200), 2) } else { (Duration::from_millis(2), 1) };
                g.sample_kind(rtt, if kinds { kind } else { 1 }, now);
                if i >= 5_000 {
                    lowest = lowest.min(g.limit());
                }
            }
            if kinds {
                assert!(!g.queueing(), "the shift read as queueing");
                assert!(lowest >= 16, "cut to {lowest} for a change of mix");
                assert!(g.limit() > 100, "the limit grew with the slow route's share: {}", g.limit());
            } else {
                assert_eq!(lowest, 2, "one kind for both: the shift reads as queueing");
            }
        }
    }

    /// Log-normal latencies (median 20 ms, p99 three times p50) from a fixed xorshift
    /// sequence, with the sequence's mean.
    fn noisy_latencies(n: usize) -> (Vec<Duration>, f64) {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut uniform = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let sigma = 3f64.ln() / 2.326;
        let all: Vec<f64> = (0..n)
            .map(|_| {
                let (u1, u2) = (uniform().max(1e-12), uniform());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                0.020 * (sigma * z).exp()
            })
            .collect();
        let mean = all.iter().sum::<f64>() / n as f64;
        (all.into_iter().map(Duration::from_secs_f64).collect(), mean)
    }

    #[test]
    fn a_noisy_upstream_whose_limit_does_not_bind_keeps_its_baseline_near_its_mean() {
        // 1000 req/s for 25 s, 4 in flight under a limit of 16 or more: it never binds. The
        // lowest candidate alone took the baseline to the luckiest of many means; the
        // re-measure when a probe is due (at 10 and 20 s) takes it back to the mean.
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        let (latencies, mean) = noisy_latencies(25_000);
        let mut lowest = f64::MAX;
        for (i, rtt) in latencies.into_iter().enumerate() {
            now += Duration::from_millis(1);
            g.observe_in_flight(4);
            g.sample(rtt, now);
            if i > 1000 {
                lowest = lowest.min(g.baseline().expect("measured").as_secs_f64());
            }
        }
        let b = g.baseline().expect("measured").as_secs_f64();
        assert!(b > 0.9 * mean && b < 1.1 * mean, "baseline {b} for a mean latency of {mean}");
        // In between, the candidates of 64 samples kept it from sinking far.
        assert!(lowest > 0.75 * mean, "lowest baseline {lowest} for a mean latency of {mean}");
        // The unused limit rests at twice the peak in flight.
        assert!(g.limit() >= 8, "limit {}", g.limit());
    }

    #[test]
    fn a_limit_that_binds_is_re_measured_by_its_probe_only() {
        // A pool of 4 x 10 ms held at its limit for 25 s: every window binds, none counts
        // towards a re-measure without a probe, and the probes (due every 10 s) run.
        let mut now = Instant::now();
        let end = now + Duration::from_secs(25);
        let mut g = Gradient::new(&settings(), 1024, now);
        let mut probes = 0;
        while now < end {
            let c = g.limit();
            let rtt = latency(c, 4, Duration::from_millis(10));
            now += rtt / 5;
            g.observe_in_flight(c);
            let was = g.probing;
            g.sample(rtt, now);
            probes += usize::from(g.probing && !was);
            assert_eq!(g.unbound_windows, 0, "a window the limit did not bind");
        }
        assert!(probes >= 2, "{probes} probes in 25 s");
        assert!((4..=5).contains(&g.limit()), "limit {} for capacity 4", g.limit());
    }

    #[test]
    fn routes_beyond_the_most_told_apart_count_but_do_not_move_the_latency() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        for round in 0..10u64 {
            for kind in 0..MAX_KINDS as u64 {
                now += Duration::from_millis(1);
                g.observe_in_flight(4);
                g.sample_kind(Duration::from_millis(2 + round % 2), kind, now);
            }
        }
        assert_eq!(g.kinds().len(), MAX_KINDS);
        assert!(g.kinds().iter().all(|k| k.1.is_some()), "every route measured");
        // A further route, 100 times slower, held at the limit: not a kind of its own, and its
        // latency says nothing about the others'.
        for _ in 0..500 {
            now += Duration::from_millis(1);
            g.observe_in_flight(g.limit());
            g.note_bound();
            g.sample_kind(Duration::from_millis(200), 1000, now);
            g.sample_kind(Duration::from_millis(2), 1, now);
        }
        assert_eq!(g.kinds().len(), MAX_KINDS);
        assert!(!g.queueing() && g.limit() >= 16, "limit {}", g.limit());
    }

    #[test]
    fn a_route_first_seen_in_a_queue_is_measured_without_it_and_an_absent_one_keeps_its_own() {
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        for _ in 0..20 {
            now += Duration::from_millis(5);
            g.observe_in_flight(2);
            g.sample_kind(Duration::from_millis(10), 1, now);
            g.sample_kind(Duration::from_millis(50), 3, now);
        }
        // The upstream queues: route 1 takes twice its no-load latency. Route 2, new, takes
        // 40 ms, of which 20 were the queue.
        for _ in 0..20 {
            now += Duration::from_millis(5);
            g.observe_in_flight(2);
            g.sample_kind(Duration::from_millis(20), 1, now);
            g.sample_kind(Duration::from_millis(40), 2, now);
        }
        let kinds = g.kinds();
        let of = |key: u64| kinds.iter().find(|k| k.0 == key).and_then(|k| k.1).expect("measured");
        assert_eq!(of(1), Duration::from_millis(10));
        let two = of(2);
        assert!(two < Duration::from_millis(25), "route 2 measured in the queue: {two:?}");
        // A probe re-measures the routes in its window; route 3 sent nothing and keeps its own.
        now += Duration::from_secs(11);
        for _ in 0..40 {
            now += Duration::from_millis(5);
            g.observe_in_flight(2);
            g.note_bound();
            g.sample_kind(Duration::from_millis(12), 1, now);
        }
        let kinds = g.kinds();
        let of = |key: u64| kinds.iter().find(|k| k.0 == key).and_then(|k| k.1).expect("measured");
        assert_eq!(of(1), Duration::from_millis(12), "re-measured by the probe");
        assert_eq!(of(3), Duration::from_millis(50), "not in the probe window: kept");
    }
}
