//! An HTTP/2 origin for the end-to-end tests (the h2 crate's server on a tokio runtime in a
//! thread of its own), cleartext or TLS. It echoes: the request body comes back as DATA as it
//! arrives (so bidirectional streaming shows), with trailers `grpc-status: 0` and
//! `x-echo-te` telling what TE it saw; `GET /bytes/N` answers N bytes; `GET /hints/N` sends N
//! `103 Early Hints` (with a `link` field) and then `200` with the body `ok`; `GET /reset` sends
//! a `200` head and 2 bytes, then resets the stream with INTERNAL_ERROR; `/refuse-once/<x>` is
//! refused with REFUSED_STREAM the first time and served like any other path after;
//! `/refuse-after-data-once/<n>` likewise, but only once `n` bytes of the body arrived
//! (`/refuse-after-data-twice/<n>`: the first two times). An
//! echo's trailers name the request's trailers, each as `x-echo-<name>`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// What the origin saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: http::HeaderMap,
}

pub struct H2Origin {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl H2Origin {
    /// Starts on 127.0.0.1:0; with `tls` (a rustls server config offering h2) over TLS.
    pub fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { continue };
                    let log = Arc::clone(&log);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        match tls {
                            Some(cfg) => {
                                let Ok(s) = tokio_rustls::TlsAcceptor::from(cfg).accept(tcp).await else { return };
                                serve(s, log).await;
                            }
                            None => serve(tcp, log).await,
                        }
                    });
                }
            });
        });
        Self { addr, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve<T>(io: T, log: Arc<Mutex<Vec<Seen>>>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Ok(mut conn) = h2::server::handshake(io).await else { return };
    while let Some(Ok((req, respond))) = conn.accept().await {
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            let _ = handle(req, respond, log).await;
        });
    }
}

async fn handle(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    log: Arc<Mutex<Vec<Seen>>>,
) -> Result<(), h2::Error> {
    let (parts, mut body) = req.into_parts();
    log.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
        headers: parts.headers.clone(),
    });
    if let Some(n) = parts.uri.path().strip_prefix("/bytes/").and_then(|n| n.parse::<usize>().ok()) {
        let resp = http::Response::builder().status(200).header("content-length", n).body(()).unwrap();
        let mut tx = respond.send_response(resp, n == 0)?;
        let mut left = n;
        while left > 0 {
            let piece = left.min(16 * 1024);
            tx.reserve_capacity(piece);
            let cap = std::future::poll_fn(|cx| tx.poll_capacity(cx)).await.unwrap_or(Ok(0))?;
            let take = cap.min(piece);
            left -= take;
            tx.send_data(Bytes::from(vec![b'a'; take]), left == 0)?;
        }
        return Ok(());
    }
    if parts.uri.path().starts_with("/refuse-once/") {
        // The first request for a path is refused (not processed, RFC 9113 §8.7), later ones served.
        let path = parts.uri.path().to_owned();
        let seen = log.lock().unwrap().iter().filter(|s| s.path == path).count();
        if seen == 1 {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            return Ok(());
        }
    }
    let path = parts.uri.path();
    let refusing = [("/refuse-after-data-once/", 1), ("/refuse-after-data-twice/", 2)]
        .into_iter()
        .find_map(|(prefix, times)| Some((path.strip_prefix(prefix)?.parse::<usize>().ok()?, times)));
    if let Some((n, times)) = refusing {
        let path = parts.uri.path().to_owned();
        let seen = log.lock().unwrap().iter().filter(|s| s.path == path).count();
        if seen <= times {
            let mut got = 0;
            while got < n {
                let Some(Ok(chunk)) = body.data().await else { break };
                got += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            return Ok(());
        }
    }
    if parts.uri.path().starts_with("/fail-once/") || parts.uri.path().starts_with("/shed/") {
        // `/fail-once/`: a 503 for the first request of a path, 200 after; `/shed/`: always a
        // 503 that marks load shedding (never to be retried).
        let path = parts.uri.path().to_owned();
        let seen = log.lock().unwrap().iter().filter(|s| s.path == path).count();
        let shed = path.starts_with("/shed/");
        let status = if shed || seen == 1 { 503 } else { 200 };
        let mut resp = http::Response::builder().status(status).header("content-length", 2);
        if shed {
            resp = resp.header("x-gateway-reason", "shed");
        }
        let mut tx = respond.send_response(resp.body(()).unwrap(), false)?;
        tx.send_data(Bytes::from_static(b"ok"), true)?;
        return Ok(());
    }
    if parts.uri.path() == "/reset" {
        let resp = http::Response::builder().status(200).header("content-length", 100).body(()).unwrap();
        let mut tx = respond.send_response(resp, false)?;
        tx.send_data(Bytes::from_static(b"ab"), false)?;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tx.send_reset(h2::Reason::INTERNAL_ERROR);
        return Ok(());
    }
    if let Some(n) = parts.uri.path().strip_prefix("/hints/").and_then(|n| n.parse::<usize>().ok()) {
        for _ in 0..n {
            let hint = http::Response::builder().status(103).header("link", "</a.css>; rel=preload").body(()).unwrap();
            respond.send_informational(hint)?;
        }
        let resp = http::Response::builder().status(200).header("content-length", 2).body(()).unwrap();
        let mut tx = respond.send_response(resp, false)?;
        tx.send_data(Bytes::from_static(b"ok"), true)?;
        return Ok(());
    }
    let te = parts.headers.get("te").map(|v| v.to_str().unwrap_or("").to_owned()).unwrap_or_default();
    let ctype = parts.headers.get("content-type").cloned();
    let mut resp = http::Response::builder().status(200);
    if let Some(c) = ctype {
        resp = resp.header("content-type", c);
    }
    let mut tx = respond.send_response(resp.body(()).unwrap(), false)?;
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        tx.reserve_capacity(chunk.len());
        tx.send_data(chunk, false)?;
    }
    let mut trailers = http::HeaderMap::new();
    if let Ok(Some(theirs)) = body.trailers().await {
        for (name, value) in &theirs {
            if let Ok(n) = http::HeaderName::from_bytes(format!("x-echo-{name}").as_bytes()) {
                trailers.insert(n, value.clone());
            }
        }
    }
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    trailers.insert("x-echo-te", http::HeaderValue::from_str(if te.is_empty() { "none" } else { &te }).unwrap());
    tx.send_trailers(trailers)?;
    Ok(())
}
