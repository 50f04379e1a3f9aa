//! What a TLS 1.3 server spends per small request and answer in user space, three ways:
//! - `buffered`: rustls' buffered API driven as the gateway's `runtime/uring_tls.rs` drives it
//!   (ciphertext fed with `read_tls` + `process_new_packets`, plaintext copied out through the
//!   reader, the answer written with `writer().write` and taken with `write_tls` into a fresh Vec);
//! - `unbuffered`: rustls' unbuffered API (records processed from the caller's buffer, the
//!   plaintext copied out of `ReadTraffic`, the answer encrypted into the caller's buffer);
//! - `records`: a record layer of one's own on the secrets rustls hands over after the handshake
//!   (aws-lc-rs AES-256-GCM opened and sealed in place), the floor of any API.
//!
//! The client is rustls' buffered client in every mode; only the server's step is counted
//! (callgrind `--toggle-collect=*server_step*`), or timed natively.

use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::time::Instant;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::ConnectionState;
use rustls::{ClientConfig, ClientConnection, ConnectionTrafficSecrets, ServerConfig, ServerConnection};

const REQ: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:18443\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n";
const RESP: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sat, 05 Dec 2026 09:00:00 GMT\r\nContent-Type: application/octet-stream\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";

fn configs(extract: bool) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let provider = Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384],
        ..rustls::crypto::aws_lc_rs::default_provider()
    });
    let cert = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()]).unwrap();
    let der = CertificateDer::from(cert.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let mut server = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .unwrap();
    server.enable_secret_extraction = extract;
    server.send_tls13_tickets = 0;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(client), Arc::new(server))
}

fn client(config: &Arc<ClientConfig>) -> ClientConnection {
    ClientConnection::new(Arc::clone(config), ServerName::try_from("a.test").unwrap()).unwrap()
}

fn buffered_pair(extract: bool) -> (ClientConnection, ServerConnection) {
    let (cc, sc) = configs(extract);
    let mut c = client(&cc);
    let mut s = ServerConnection::new(sc).unwrap();
    while c.is_handshaking() || s.is_handshaking() || c.wants_write() || s.wants_write() {
        let mut wire = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut wire).unwrap();
        }
        let mut rd = &wire[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets().unwrap();
        }
        let mut wire = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut wire).unwrap();
        }
        let mut rd = &wire[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
        }
    }
    (c, s)
}

fn unbuffered_pair() -> (ClientConnection, UnbufferedServerConnection, Vec<u8>) {
    let (cc, sc) = configs(false);
    let mut c = client(&cc);
    let mut s = UnbufferedServerConnection::new(sc).unwrap();
    let mut incoming: Vec<u8> = Vec::new();
    let mut out = vec![0u8; 16 * 1024];
    let mut out_len = 0;
    loop {
        while c.wants_write() {
            c.write_tls(&mut incoming).unwrap();
        }
        let status = s.process_tls_records(&mut incoming);
        let discard = status.discard;
        match status.state.unwrap() {
            ConnectionState::EncodeTlsData(mut e) => out_len += e.encode(&mut out[out_len..]).unwrap(),
            ConnectionState::TransmitTlsData(t) => {
                let mut rd = &out[..out_len];
                while !rd.is_empty() {
                    c.read_tls(&mut rd).unwrap();
                    c.process_new_packets().unwrap();
                }
                out_len = 0;
                t.done();
            }
            ConnectionState::BlockedHandshake => {}
            ConnectionState::WriteTraffic(_) => {
                incoming.drain(..discard);
                if !c.is_handshaking() {
                    break;
                }
                continue;
            }
            other => panic!("handshake: {other:?}"),
        }
        incoming.drain(..discard);
    }
    (c, s, incoming)
}

/// The client's half of one exchange: the request's record out, then the answer taken in.
fn client_send(c: &mut ClientConnection, wire: &mut Vec<u8>) {
    c.writer().write_all(REQ).unwrap();
    wire.clear();
    c.write_tls(wire).unwrap();
}

fn client_receive(c: &mut ClientConnection, answer: &[u8]) {
    let mut rd = answer;
    while !rd.is_empty() {
        c.read_tls(&mut rd).unwrap();
        c.process_new_packets().unwrap();
    }
    let mut sink = [0u8; 512];
    let n = c.reader().read(&mut sink).unwrap();
    assert_eq!(&sink[..n], RESP);
}

/// As `uring_tls.rs`: `feed`, `take_plaintext`, `write_all` + `flush` (a fresh Vec per flush).
#[inline(never)]
fn server_step_buffered(s: &mut ServerConnection, wire: &[u8], request: &mut Vec<u8>) -> Vec<u8> {
    let mut rest = wire;
    while !rest.is_empty() {
        s.read_tls(&mut rest).unwrap();
        s.process_new_packets().unwrap();
    }
    let mut reader = s.reader();
    loop {
        match reader.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => {
                let n = chunk.len();
                request.extend_from_slice(chunk);
                reader.consume(n);
            }
            Err(_) => break,
        }
    }
    s.writer().write(RESP).unwrap();
    let mut out = Vec::new();
    while s.wants_write() {
        s.write_tls(&mut out).unwrap();
    }
    out
}

/// rustls' unbuffered API: the record processed from `incoming`, its plaintext copied out, the
/// answer encrypted into `out` (kept between calls).
#[inline(never)]
fn server_step_unbuffered(
    s: &mut UnbufferedServerConnection,
    incoming: &mut Vec<u8>,
    request: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> usize {
    let mut written = 0;
    loop {
        let status = s.process_tls_records(incoming);
        let mut discard = status.discard;
        match status.state.unwrap() {
            ConnectionState::ReadTraffic(mut rt) => {
                while let Some(rec) = rt.next_record() {
                    let rec = rec.unwrap();
                    discard += rec.discard;
                    request.extend_from_slice(rec.payload);
                }
            }
            ConnectionState::WriteTraffic(mut wt) => {
                if written == 0 && !request.is_empty() {
                    written = wt.encrypt(RESP, &mut out[..]).unwrap();
                }
                incoming.drain(..discard);
                if incoming.is_empty() {
                    return written;
                }
                continue;
            }
            other => panic!("traffic: {other:?}"),
        }
        incoming.drain(..discard);
    }
}

struct Records {
    rx: LessSafeKey,
    rx_iv: [u8; 12],
    rx_seq: u64,
    tx: LessSafeKey,
    tx_iv: [u8; 12],
    tx_seq: u64,
}

fn nonce(iv: &[u8; 12], seq: u64) -> Nonce {
    let mut n = *iv;
    for (b, s) in n[4..].iter_mut().zip(seq.to_be_bytes()) {
        *b ^= s;
    }
    Nonce::assume_unique_for_key(n)
}

fn key_iv(secrets: ConnectionTrafficSecrets) -> (LessSafeKey, [u8; 12]) {
    match secrets {
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            let k = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key.as_ref()).unwrap());
            (k, iv.as_ref().try_into().unwrap())
        }
        _ => panic!("AES-256-GCM only"),
    }
}

/// A record layer of one's own: the request's record opened in place in `wire`, its plaintext
/// copied into `request`; the answer sealed in place into `out` (kept between calls).
#[inline(never)]
fn server_step_records(r: &mut Records, wire: &mut [u8], request: &mut Vec<u8>, out: &mut Vec<u8>) {
    let (header, body) = wire.split_at_mut(5);
    assert_eq!(header[0], 23);
    let len = u16::from_be_bytes([header[3], header[4]]) as usize;
    let body = &mut body[..len];
    let plain = r.rx.open_in_place(nonce(&r.rx_iv, r.rx_seq), Aad::from(&*header), body).unwrap();
    r.rx_seq += 1;
    let end = plain.iter().rposition(|&b| b != 0).unwrap();
    assert_eq!(plain[end], 23);
    request.extend_from_slice(&plain[..end]);

    out.clear();
    let len = RESP.len() + 1 + 16;
    out.extend_from_slice(&[23, 3, 3, (len >> 8) as u8, len as u8]);
    out.extend_from_slice(RESP);
    out.push(23);
    let (header, body) = out.split_at_mut(5);
    let header: [u8; 5] = header.try_into().unwrap();
    let tag = r.tx.seal_in_place_separate_tag(nonce(&r.tx_iv, r.tx_seq), Aad::from(header), body).unwrap();
    r.tx_seq += 1;
    out.extend_from_slice(tag.as_ref());
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "buffered".into());
    let n: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(100_000);
    let mut wire = Vec::with_capacity(4096);
    let mut request = Vec::with_capacity(8192);
    let start;
    match mode.as_str() {
        "buffered" => {
            let (mut c, mut s) = buffered_pair(false);
            start = Instant::now();
            for _ in 0..n {
                client_send(&mut c, &mut wire);
                request.clear();
                let out = server_step_buffered(&mut s, &wire, &mut request);
                assert_eq!(request, REQ);
                client_receive(&mut c, &out);
            }
        }
        "unbuffered" => {
            let (mut c, mut s, mut incoming) = unbuffered_pair();
            let mut out = vec![0u8; 16 * 1024];
            start = Instant::now();
            for _ in 0..n {
                client_send(&mut c, &mut wire);
                incoming.extend_from_slice(&wire);
                request.clear();
                let len = server_step_unbuffered(&mut s, &mut incoming, &mut request, &mut out);
                assert_eq!(request, REQ);
                client_receive(&mut c, &out[..len]);
            }
        }
        "records" => {
            let (mut c, s) = buffered_pair(true);
            let secrets = s.dangerous_extract_secrets().unwrap();
            let (rx, rx_iv) = key_iv(secrets.rx.1);
            let (tx, tx_iv) = key_iv(secrets.tx.1);
            let mut r = Records { rx, rx_iv, rx_seq: secrets.rx.0, tx, tx_iv, tx_seq: secrets.tx.0 };
            let mut out = Vec::with_capacity(4096);
            start = Instant::now();
            for _ in 0..n {
                client_send(&mut c, &mut wire);
                request.clear();
                server_step_records(&mut r, &mut wire, &mut request, &mut out);
                assert_eq!(request, REQ);
                client_receive(&mut c, &out);
            }
        }
        m => panic!("mode {m}"),
    }
    let el = start.elapsed();
    println!("{mode}: {n} exchanges, {:.0} ns per exchange (client included)", el.as_nanos() as f64 / n as f64);
}
