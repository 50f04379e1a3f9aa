//! Fault injection for the gateway's own tests (cargo feature `fault-injection`, which only
//! the test build turns on: never compiled into a release or an installed binary). A request
//! with `x-gateway-fault` makes its worker fail at a chosen place, so that tests can check
//! that a panic is contained where it should be and that `/healthz` tells the truth:
//!
//! | value | effect |
//! | --- | --- |
//! | `panic` | panics in the pipeline, inside the request's (HTTP/1.1) or stream's (HTTP/2) boundary |
//! | `panic-after-request` | panics once the request is answered, when it is accounted (HTTP/1.1: in the connection task, outside the request) |
//! | `panic-worker` | panics in the worker's next tick, outside any connection: the worker dies |
//! | `stall-worker=MS` | blocks the worker's thread for MS milliseconds at its next tick |
//! | `splice-pipe-unavailable` | the worker's next spliced body finds no pipe (as at the descriptor limit) and is copied |

use std::cell::Cell;
use std::time::Duration;

use crate::request::Request;
use crate::worker::Worker;

/// The request field that arms a fault.
pub const HEADER: &[u8] = b"x-gateway-fault";

#[derive(Clone, Copy)]
enum Armed {
    Finish,
    Tick,
    Stall(u64),
}

thread_local! {
    /// The fault armed on this worker's thread, if any.
    static ARMED: Cell<Option<Armed>> = const { Cell::new(None) };
}

/// At dispatch: panics or arms the fault `req` asks for.
pub fn on_request(req: &Request<'_>) {
    let Some(value) = req.fields.first(HEADER) else { return };
    let armed = match value {
        b"panic" => panic!("fault injection: panic in the request pipeline"),
        b"panic-after-request" => Armed::Finish,
        b"panic-worker" => Armed::Tick,
        b"splice-pipe-unavailable" => {
            crate::runtime::splice::fail_next_pipe();
            return;
        }
        v => match v.strip_prefix(b"stall-worker=").and_then(|ms| std::str::from_utf8(ms).ok()?.parse().ok()) {
            Some(ms) => Armed::Stall(ms),
            None => return,
        },
    };
    ARMED.set(Some(armed));
}

/// When a request is accounted.
pub fn on_finish() {
    if let Some(Armed::Finish) = ARMED.get() {
        ARMED.set(None);
        panic!("fault injection: panic after the request");
    }
}

/// At the worker's tick.
pub fn on_tick(worker: &Worker) {
    match ARMED.get() {
        Some(Armed::Tick) => {
            ARMED.set(None);
            panic!("fault injection: panic in worker {}'s tick", worker.id);
        }
        Some(Armed::Stall(ms)) => {
            ARMED.set(None);
            std::thread::sleep(Duration::from_millis(ms));
        }
        _ => {}
    }
}
