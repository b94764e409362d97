//! A minimal HTTP/1.1 keep-alive client for query latency: one TCP
//! connection, requests written and answers read on the calling thread, so
//! a sample is the server's time plus one loopback round trip. (reqwest's
//! blocking client hands every request to a runtime thread and back, which
//! is client time, not server time.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

pub struct Connection {
    /// `host:port`.
    addr: String,
    stream: Option<BufReader<TcpStream>>,
}

/// Status and body of an answer.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Connection {
    /// `base` is `http://host:port`.
    pub fn new(base: &str) -> Result<Connection, String> {
        let addr = base
            .strip_prefix("http://")
            .ok_or_else(|| format!("{base}: only http:// URLs are supported"))?
            .trim_end_matches('/')
            .to_string();
        Ok(Connection { addr, stream: None })
    }

    /// GET `path`; a connection the server closed while idle is reopened
    /// once.
    pub fn get(&mut self, path: &str) -> Result<Answer, String> {
        self.request("GET", path, &[], &[])
    }

    /// POST `body` to `path` with these extra headers (e.g. Content-Type).
    pub fn post(&mut self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Answer, String> {
        self.request("POST", path, headers, body)
    }

    fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Answer, String> {
        let reused = self.stream.is_some();
        match self.try_request(method, path, headers, body) {
            Ok(a) => Ok(a),
            Err(_) if reused => {
                self.stream = None;
                self.try_request(method, path, headers, body)
            }
            Err(e) => Err(e),
        }
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Answer, String> {
        let addr = self.addr.clone();
        let err = |e: std::io::Error| format!("{method} {addr}{path}: {e}");
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr).map_err(err)?;
            s.set_nodelay(true).map_err(err)?;
            self.stream = Some(BufReader::new(s));
        }
        let stream = self.stream.as_mut().ok_or("no connection")?;
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("accept")) {
            request.push_str("Accept: */*\r\n");
        }
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        if method != "GET" {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        stream.get_mut().write_all(&bytes).map_err(err)?;
        let mut line = String::new();
        stream.read_line(&mut line).map_err(err)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{method} {path}: bad status line {line:?}"))?;
        let (mut length, mut chunked, mut close) = (None, false, false);
        loop {
            line.clear();
            stream.read_line(&mut line).map_err(err)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                stream.read_line(&mut line).map_err(err)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| format!("{method} {path}: bad chunk size {line:?}"))?;
                let start = body.len();
                body.resize(start + size, 0);
                stream.read_exact(&mut body[start..]).map_err(err)?;
                line.clear();
                stream.read_line(&mut line).map_err(err)?;
                if size == 0 {
                    break;
                }
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            stream.read_exact(&mut body).map_err(err)?;
        } else {
            stream.read_to_end(&mut body).map_err(err)?;
            close = true;
        }
        if close {
            self.stream = None;
        }
        Ok(Answer { status, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Answers with a fixed length, chunked, and closing, over one client.
    #[test]
    fn reads_length_chunked_and_closing_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let answers = [
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_string(),
                "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                    .to_string(),
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_string(),
            ];
            let (mut s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            for (i, a) in answers.iter().enumerate() {
                let mut line = String::new();
                loop {
                    line.clear();
                    r.read_line(&mut line).unwrap();
                    if line == "\r\n" {
                        break;
                    }
                }
                s.write_all(a.as_bytes()).unwrap();
                if i == 2 {
                    drop(s);
                    // The client reconnects after a close.
                    let (mut s2, _) = listener.accept().unwrap();
                    let mut r2 = BufReader::new(s2.try_clone().unwrap());
                    let mut l = String::new();
                    while l != "\r\n" {
                        l.clear();
                        r2.read_line(&mut l).unwrap();
                    }
                    s2.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
                    return;
                }
            }
        });
        let mut c = Connection::new(&format!("http://{addr}")).unwrap();
        let a = c.get("/a").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"hello"[..]));
        let a = c.get("/b").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (404, &b"abcde"[..]));
        let a = c.get("/c").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"ok"[..]));
        let a = c.get("/d").unwrap();
        assert_eq!((a.status, a.body.len()), (200, 0));
        server.join().unwrap();
    }
}
