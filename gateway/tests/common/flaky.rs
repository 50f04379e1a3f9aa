//! An HTTP/1.1 origin that fails on command: each request is answered according to the current
//! [`Mode`], and every request that reached it is recorded (attempts can be counted).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// 200 with body "ok <port>".
    Ok = 0,
    /// 503.
    Unavailable = 1,
    /// 503 with `x-gateway-reason: shed` (an upstream that sheds load).
    Shed = 2,
    /// Close the connection without answering (after reading the request).
    Reset = 3,
    /// Never answer (hold the connection).
    Hang = 4,
    /// 500.
    Error = 5,
}

/// One request as the origin saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub struct Flaky {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    attempts: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Flaky {
    pub fn start(mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mode = Arc::new(AtomicU8::new(mode as u8));
        let attempts = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (m, a, s) = (Arc::clone(&mode), Arc::clone(&attempts), Arc::clone(&seen));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (m, a, s) = (Arc::clone(&m), Arc::clone(&a), Arc::clone(&s));
                std::thread::spawn(move || serve(stream, &m, &a, &s, addr.port()));
            }
        });
        Self { addr, mode, attempts, seen }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// Requests that reached this origin.
    pub fn attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn serve(stream: TcpStream, mode: &AtomicU8, attempts: &AtomicUsize, seen: &Mutex<Vec<Seen>>, port: u16) {
    let _ = stream.set_nodelay(true);
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut r = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        let mut length = 0usize;
        let mut chunked = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                let (n, v) = (n.trim().to_owned(), v.trim().to_owned());
                if n.eq_ignore_ascii_case("content-length") {
                    length = v.parse().unwrap_or(0);
                }
                chunked |= n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked");
                headers.push((n, v));
            }
        }
        let body = if chunked { read_chunked(&mut r) } else { read_length(&mut r, length) };
        let Some(body) = body else { return };
        attempts.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut s) = seen.lock() {
            s.push(Seen { method, path, headers, body });
        }
        let answer = match mode.load(Ordering::SeqCst) {
            0 => {
                let body = format!("ok {port}");
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len())
            }
            1 => "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\ndown".to_owned(),
            2 => "HTTP/1.1 503 Service Unavailable\r\nx-gateway-reason: shed\r\nretry-after: 1\r\ncontent-length: 4\r\n\r\nshed"
                .to_owned(),
            3 => return,
            4 => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            _ => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 5\r\n\r\nerror".to_owned(),
        };
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn read_length(r: &mut impl Read, length: usize) -> Option<Vec<u8>> {
    let mut body = vec![0; length];
    r.read_exact(&mut body).ok().map(|()| body)
}

/// A chunked body, its chunks joined (extensions and trailers ignored); `None` when it breaks.
fn read_chunked(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok().filter(|&n| n > 0)?;
        let size = line.trim_end().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            // Trailers until the empty line.
            loop {
                let mut t = String::new();
                r.read_line(&mut t).ok().filter(|&n| n > 0)?;
                if t.trim_end().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(body.get_mut(start..)?).ok()?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf).ok()?;
    }
}
