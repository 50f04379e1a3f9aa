//! One connection: read a request, record it, answer it as its plan says, repeat until either
//! side closes.

use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::modes::{self, Mode, Plan};
use super::reply::{self, Body, Reply};
use super::request::{ReadError, Reader, Request};
use super::{bad, ws};
use super::{ReceivedRequest, Shared};

/// How long a closing connection keeps reading what the peer still sends (see [`close`]).
const LINGER: Duration = Duration::from_secs(1);

pub(super) fn serve(shared: &Shared, id: u64, stream: &TcpStream) {
    let mut reader = Reader::new(stream);
    let mut out = Vec::with_capacity(4096);
    loop {
        let request = match reader.next_request() {
            Ok(Some(request)) => request,
            Ok(None) | Err(ReadError::Closed) => break,
            Err(ReadError::Bad { status, reason, head }) => {
                if let Some(head) = head {
                    shared.record(0, false, || ReceivedRequest {
                        connection: id,
                        method: head.method,
                        target: head.target,
                        version: head.version,
                        headers: head.headers,
                        body: Vec::new(),
                        chunked: false,
                        trailers: Vec::new(),
                        error: Some(reason.to_string()),
                    });
                }
                let reply =
                    Reply { status, close: true, keep_alive_1_0: false, connection: id, extra: &[], head_only: false };
                let _ = reply::send(stream, &mut out, &reply, Body::Bytes(reason.as_bytes()));
                break;
            }
        };
        shared.record(request.body.len(), true, || ReceivedRequest {
            connection: id,
            method: request.head.method.clone(),
            target: request.head.target.clone(),
            version: request.head.version,
            headers: request.head.headers.clone(),
            body: request.body.clone(),
            chunked: request.chunked,
            trailers: request.trailers.clone(),
            error: None,
        });
        match answer(shared, id, stream, &mut out, &request, &mut reader) {
            Ok(Next::KeepAlive) => {}
            Ok(Next::Close) | Err(_) => break,
        }
    }
    close(stream);
}

enum Next {
    KeepAlive,
    Close,
}

fn answer(
    shared: &Shared,
    id: u64,
    stream: &TcpStream,
    out: &mut Vec<u8>,
    request: &Request,
    reader: &mut Reader<'_>,
) -> std::io::Result<Next> {
    let close = request.close || !shared.cfg.keep_alive;
    let mut reply = Reply {
        status: shared.cfg.status,
        close,
        keep_alive_1_0: request.keep_alive_1_0,
        connection: id,
        extra: &[],
        head_only: request.head.method == "HEAD",
    };
    let plan = match modes::plan(&request.head.target, &request.head.headers) {
        Ok(plan) => plan,
        Err(rejection) => {
            reply.status = rejection.status;
            reply::send(stream, out, &reply, Body::Bytes(rejection.message.as_bytes()))?;
            return Ok(next(reply.close));
        }
    };
    let Plan { mode, status, delay } = plan;
    let delay = shared.cfg.latency.saturating_add(delay);
    if !delay.is_zero() && !shared.wait(delay) {
        return Ok(Next::Close);
    }
    reply.status = status.unwrap_or(shared.cfg.status);
    match mode {
        Mode::Default | Mode::Delay(_) => {
            reply::send(stream, out, &reply, Body::Bytes(&shared.default_body))?;
        }
        Mode::Close => {
            reply.close = true;
            reply::send(stream, out, &reply, Body::Bytes(&shared.default_body))?;
        }
        Mode::Status(code) => {
            reply.status = status.unwrap_or(code);
            let body = format!("status {}\n", reply.status);
            reply::send(stream, out, &reply, Body::Bytes(body.as_bytes()))?;
        }
        Mode::Bytes(len) => reply::send(stream, out, &reply, Body::Pattern(len))?,
        Mode::Chunked(len) => reply::send(stream, out, &reply, Body::Chunked(len))?,
        Mode::Echo => {
            if request.chunked {
                reply.extra = &[("x-origin-saw-te", "chunked")];
            }
            reply::send(stream, out, &reply, Body::Bytes(&request.body))?;
        }
        Mode::Headers => {
            let mut body = String::new();
            for (name, value) in &request.head.headers {
                body.push_str(name);
                body.push_str(": ");
                body.push_str(value);
                body.push('\n');
            }
            reply::send(stream, out, &reply, Body::Bytes(body.as_bytes()))?;
        }
        Mode::WsEcho => {
            ws::serve(shared, stream, &request.head.headers, &reader.take_buffered())?;
            return Ok(Next::Close);
        }
        Mode::Bad(what) => {
            bad::misbehave(what, stream, shared)?;
            return Ok(Next::Close);
        }
    }
    Ok(next(reply.close))
}

fn next(close: bool) -> Next {
    if close {
        Next::Close
    } else {
        Next::KeepAlive
    }
}

/// Sends FIN, then reads (for at most [`LINGER`]) what the peer still sends: closing a socket
/// with unread input sends RST, which can destroy the answer still in flight.
fn close(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut input = stream;
    let mut scratch = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() || input.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match input.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
