//! An in-process h2 server on 127.0.0.1 with scripted behaviour, certificates, and small helpers.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use monoio::io::IntoPollIo;
use monoio::net::TcpListener;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};

use super::super::{H2Endpoint, H2Settings, Transport, Waiters};
use crate::codec::h2io::{next_data, send_data};

pub const WINDOW: u32 = 65_535;

/// Runs `f` on a fusion-driver runtime (poll-io needs the runtime's poll support; the fusion
/// driver has it on io_uring and on epoll), failing the test after 10 s.
pub fn run<F: Future<Output = ()>>(f: F) {
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().expect("runtime");
    rt.block_on(async {
        crate::runtime::timeout(Duration::from_secs(10), f).await.expect("test timed out");
    });
}

/// Awaits `f` for at most 3 s.
pub async fn within<F: Future>(f: F) -> F::Output {
    crate::runtime::timeout(Duration::from_secs(3), f).await.expect("timed out")
}

/// Checks `cond` every 5 ms for at most 2 s (for state with no readiness signal).
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

pub fn settings(max_connections: usize, connect_timeout: Duration) -> H2Settings {
    H2Settings {
        connect_timeout,
        idle_timeout: Duration::from_secs(60),
        max_connections,
        initial_stream_window: WINDOW,
        initial_connection_window: WINDOW,
        max_header_list_bytes: 16 * 1024,
    }
}

pub fn plain(addr: SocketAddr, max_connections: usize) -> Rc<H2Endpoint> {
    H2Endpoint::new(addr, Transport::Plain, settings(max_connections, Duration::from_secs(2)))
}

pub fn get() -> http::Request<()> {
    http::Request::builder().uri("http://upstream.test/").body(()).expect("request")
}

/// A counter tasks can wait on.
#[derive(Default)]
pub struct Watch {
    value: Cell<usize>,
    waiters: Waiters,
}

impl Watch {
    pub fn get(&self) -> usize {
        self.value.get()
    }
    pub fn set(&self, v: usize) {
        self.value.set(v);
        self.waiters.notify_all();
    }
    pub fn add(&self) {
        self.set(self.get() + 1);
    }
    pub async fn until(&self, cond: impl Fn(usize) -> bool) {
        while !cond(self.get()) {
            self.waiters.changed().await;
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
pub enum Behavior {
    /// 200 "ok" at once.
    Respond,
    /// Every response waits for `Stats::gate` to be non-zero.
    Hold,
    /// On the first connection's first request: GOAWAY, then the response head, and the body
    /// only once the gate opens. Other requests: `Respond`.
    GoAwayFirst,
    /// Closes the socket on the first request of every connection.
    CloseOnRequest,
    /// Reads the body slowly, checks it, then sends the same pattern back.
    SlowEcho,
}

#[derive(Default)]
pub struct Stats {
    pub accepted: Watch,
    pub closed: Watch,
    pub requests: Watch,
    pub active: Watch,
    pub max_active_per_conn: Cell<usize>,
    pub gate: Watch,
    /// SlowEcho: request bytes the handler has consumed.
    pub consumed: Cell<usize>,
    pub body_ok: Cell<bool>,
    /// SlowEcho: response bytes the client has consumed, set by the test's reader.
    pub client_read: Cell<usize>,
    /// SlowEcho: `client_read` when the handler's `send_data` returned.
    pub client_read_at_sent: Cell<usize>,
}

pub struct Server {
    pub addr: SocketAddr,
    pub stats: Rc<Stats>,
}

/// Starts a server allowing `max_streams` concurrent streams per connection, TLS when `tls` is set.
pub fn serve(behavior: Behavior, max_streams: u32, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stats = Rc::new(Stats::default());
    let st = Rc::clone(&stats);
    monoio::spawn(async move {
        let mut index = 0;
        while let Ok((tcp, _)) = listener.accept().await {
            tcp.set_nodelay(true).expect("nodelay");
            st.accepted.add();
            let io = tcp.into_poll_io().expect("poll io");
            let (st, first) = (Rc::clone(&st), index == 0);
            index += 1;
            let tls = tls.clone();
            monoio::spawn(async move {
                match tls {
                    None => connection(io, behavior, max_streams, first, &st).await,
                    Some(config) => {
                        if let Ok(tls) = tokio_rustls::TlsAcceptor::from(config).accept(io).await {
                            if tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
                                connection(tls, behavior, max_streams, first, &st).await;
                            }
                        }
                    }
                }
                st.closed.add();
            });
        }
    });
    Server { addr, stats }
}

async fn connection<T>(io: T, behavior: Behavior, max_streams: u32, first_conn: bool, st: &Rc<Stats>)
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(max_streams)
        .initial_window_size(WINDOW)
        .handshake::<T, Bytes>(io)
        .await
    else {
        return;
    };
    let active = Rc::new(Cell::new(0usize));
    let mut first = true;
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        st.requests.add();
        let body = req.into_body();
        match behavior {
            Behavior::CloseOnRequest => return,
            Behavior::GoAwayFirst if first && first_conn => {
                conn.graceful_shutdown();
                let mut tx = respond.send_response(ok(), false).expect("head");
                let st = Rc::clone(st);
                monoio::spawn(async move {
                    st.gate.until(|g| g > 0).await;
                    let _ = send_data(&mut tx, Bytes::from_static(b"late"), true).await;
                });
            }
            Behavior::Respond | Behavior::GoAwayFirst => {
                let mut tx = respond.send_response(ok(), false).expect("head");
                let _ = tx.send_data(Bytes::from_static(b"ok"), true);
            }
            Behavior::Hold => {
                active.set(active.get() + 1);
                st.max_active_per_conn.set(st.max_active_per_conn.get().max(active.get()));
                st.active.add();
                let (st, active) = (Rc::clone(st), Rc::clone(&active));
                monoio::spawn(async move {
                    st.gate.until(|g| g > 0).await;
                    let mut tx = respond.send_response(ok(), false).expect("head");
                    let _ = tx.send_data(Bytes::from_static(b"ok"), true);
                    active.set(active.get() - 1);
                });
            }
            Behavior::SlowEcho => {
                monoio::spawn(slow_echo(body, respond, Rc::clone(st)));
            }
        }
        first = false;
    }
}

async fn slow_echo(mut body: RecvStream, mut respond: SendResponse<Bytes>, st: Rc<Stats>) {
    let mut ok_so_far = true;
    while let Some(chunk) = next_data(&mut body).await {
        let chunk = chunk.expect("request body");
        ok_so_far &= is_pattern(st.consumed.get(), &chunk);
        st.consumed.set(st.consumed.get() + chunk.len());
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
    st.body_ok.set(ok_so_far);
    let mut tx = respond.send_response(ok(), false).expect("head");
    send_data(&mut tx, pattern(st.consumed.get()), true).await.expect("response body");
    st.client_read_at_sent.set(st.client_read.get());
}

fn ok() -> http::Response<()> {
    http::Response::builder().status(200).body(()).expect("response")
}

pub fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>().into()
}

/// Whether `chunk` continues `pattern` at `offset`.
pub fn is_pattern(offset: usize, chunk: &[u8]) -> bool {
    chunk.iter().enumerate().all(|(i, b)| *b == ((offset + i) % 251) as u8)
}

/// A CA, a leaf for "localhost" signed by it (CA:FALSE), and configs: the server offering
/// `server_alpn`, the client trusting the CA and offering `client_alpn`.
pub fn tls_pair(server_alpn: &[&[u8]], client_alpn: &[&[u8]]) -> (Arc<rustls::ServerConfig>, Transport) {
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca cert");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("leaf params");
    leaf.is_ca = IsCa::ExplicitNoCa;
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).expect("leaf cert");

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let mut server = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![leaf_cert.der().clone()], key)
        .expect("server config");
    server.alpn_protocols = server_alpn.iter().map(|p| p.to_vec()).collect();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::clone(ca_cert.der())).expect("root");
    let mut client = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    client.alpn_protocols = client_alpn.iter().map(|p| p.to_vec()).collect();
    let server_name = ServerName::try_from("localhost").expect("name");
    (Arc::new(server), Transport::Tls { config: Arc::new(client), server_name })
}
