//! HTTP/1.1 by hand over a TCP socket, for what no HTTP client library does: connect and send
//! nothing, send a request a byte at a time, send a header block no client would.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What came back on a connection.
#[derive(Debug)]
pub enum Answer {
    /// The server closed the connection (or reset it) without a complete response.
    Closed,
    Response(RawResponse),
}

/// A response as read off the wire.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// The status line and headers, as text.
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One client connection.
pub struct Raw {
    stream: TcpStream,
    received: Vec<u8>,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Raw {
            stream,
            received: Vec::new(),
        }
    }

    /// Sends `bytes` at once. A connection the server already closed answers with what it sent
    /// before closing.
    pub fn send(&mut self, bytes: &[u8]) -> Option<Answer> {
        match self.stream.write_all(bytes) {
            Ok(()) => None,
            Err(_) => Some(self.answer(Duration::from_secs(5))),
        }
    }

    /// Sends `bytes` one at a time, `every` apart, and stops as soon as the server answers or
    /// closes the connection; once all are sent, waits up to `then` for the answer.
    pub fn dribble(&mut self, bytes: &[u8], every: Duration, then: Duration) -> Answer {
        for byte in bytes {
            if let Some(answer) = self.poll(every) {
                return answer;
            }
            if self.stream.write_all(&[*byte]).is_err() {
                return self.answer(Duration::from_secs(5));
            }
        }
        self.answer(then)
    }

    /// Waits up to `within` for a complete response or the end of the connection; panics when
    /// neither comes.
    pub fn answer(&mut self, within: Duration) -> Answer {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the server neither answered nor closed the connection within {within:?} (got {:?})",
                String::from_utf8_lossy(&self.received)
            );
            if let Some(answer) = self.poll(left.min(Duration::from_millis(100))) {
                return answer;
            }
        }
    }

    /// Reads what arrives within `wait`: `Some` once a response is complete or the connection
    /// has ended.
    fn poll(&mut self, wait: Duration) -> Option<Answer> {
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .expect("read timeout");
        let mut buf = [0u8; 16 * 1024];
        match self.stream.read(&mut buf) {
            Ok(0) => Some(self.complete().unwrap_or(Answer::Closed)),
            Ok(n) => {
                self.received.extend_from_slice(&buf[..n]);
                self.complete()
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            // Reset: whatever came before it may be lost.
            Err(_) => Some(self.complete().unwrap_or(Answer::Closed)),
        }
    }

    /// The response received so far, if it is complete (headers and `Content-Length` bytes);
    /// it is taken off what was received.
    fn complete(&mut self) -> Option<Answer> {
        let end = self.received.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&self.received[..end]).into_owned();
        let status = head.split(' ').nth(1)?.parse().ok()?;
        let response = RawResponse {
            status,
            head,
            body: Vec::new(),
        };
        let length: usize = response
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let body_start = end + 4;
        if self.received.len() < body_start + length {
            return None;
        }
        let body = self.received[body_start..body_start + length].to_vec();
        self.received.drain(..body_start + length);
        Some(Answer::Response(RawResponse { body, ..response }))
    }
}
