//! The misbehaviours: byte-exact broken responses for the gateway's upstream-strictness tests.
//! The caller closes the connection after each.

use std::io::{self, Write};
use std::net::TcpStream;

use super::modes::Bad;
use super::{pattern, Shared};

/// Size of the header field `/bad/huge-head` sends.
pub(crate) const HUGE_HEADER_BYTES: usize = 100 * 1024;

pub(crate) fn misbehave(bad: Bad, stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    let mut stream = stream;
    match bad {
        Bad::CloseMidBody => {
            let mut out = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n".to_vec();
            out.extend(pattern(10));
            stream.write_all(&out)
        }
        Bad::ClAndTe => stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
        ),
        Bad::DupCl => stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok"),
        Bad::Chunked => {
            stream.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
        }
        Bad::Garbage => stream.write_all(b"\x00\x01\x02 this is not HTTP \xff\xfe\r\n\r\n"),
        Bad::NoResponse => Ok(()),
        Bad::HugeHead => {
            let mut out = b"HTTP/1.1 200 OK\r\nx-huge: ".to_vec();
            out.resize(out.len() + HUGE_HEADER_BYTES, b'h');
            out.extend_from_slice(b"\r\ncontent-length: 2\r\n\r\nok");
            stream.write_all(&out)
        }
        Bad::Stall => {
            shared.wait_for_shutdown();
            Ok(())
        }
        Bad::Switch => stream
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\nafter"),
        Bad::UntilClose => {
            let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n".to_vec();
            out.extend(pattern(1000));
            stream.write_all(&out)
        }
    }
}
