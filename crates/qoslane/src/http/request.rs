//! A request head and its answer: where the head ends, what it asks
//! (GET or HEAD of a path; anything else a `400`/`405`, a head too large or
//! too slow a `431`/`408`), and the answer's bytes from the route's [`Reply`].
//! No I/O here: the poll loop (`http.rs`) reads and writes.

/// What a route answers a GET (or HEAD) of a path with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status line's code and reason: `200 OK`.
    pub status: &'static str,
    pub content_type: &'static str,
    pub body: String,
}

/// The content type of the server's own plain answers.
pub const PLAIN: &str = "text/plain; charset=utf-8";

/// What the request head came to.
pub(super) enum Head<'a> {
    Complete(&'a [u8]),
    TooLarge,
    TimedOut,
}

/// The length of the head (through its blank line), if it is all there.
pub(super) fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub(super) fn response(status: &str, ctype: &str, body: &str, extra: &[(&str, &str)]) -> String {
    let mut head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// The answer to `head`, and whether to linger after it (the request was
/// not read to its end).
pub(super) fn answer(route: &dyn Fn(&str) -> Reply, head: Head<'_>) -> (Vec<u8>, bool) {
    let text;
    let (method, path) = match head {
        Head::Complete(bytes) => {
            text = String::from_utf8_lossy(bytes).into_owned();
            let mut parts = text.lines().next().unwrap_or("").split(' ');
            let method = parts.next().unwrap_or("");
            let target = parts.next().unwrap_or("");
            let version = parts.next().unwrap_or("");
            if !version.starts_with("HTTP/") || !target.starts_with('/') {
                ("", "")
            } else {
                (method, target.split('?').next().unwrap_or(""))
            }
        }
        Head::TooLarge | Head::TimedOut => ("", ""),
    };
    let plain = |status, body: &str| Reply {
        status,
        content_type: PLAIN,
        body: body.to_owned(),
    };
    let mut extra: Vec<(&str, &str)> = Vec::new();
    let reply = match head {
        Head::TooLarge => plain("431 Request Header Fields Too Large", "request too large\n"),
        Head::TimedOut => plain("408 Request Timeout", "request timeout\n"),
        _ if method.is_empty() => plain("400 Bad Request", "bad request\n"),
        _ if method != "GET" && method != "HEAD" => {
            extra.push(("Allow", "GET, HEAD"));
            plain("405 Method Not Allowed", "only GET and HEAD\n")
        }
        Head::Complete(_) => route(path),
    };
    let mut out = response(reply.status, reply.content_type, &reply.body, &extra).into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(reply.body.as_bytes());
    }
    (out, !matches!(head, Head::Complete(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Reply {
        Reply {
            status: if path == "/x" {
                "200 OK"
            } else {
                "404 Not Found"
            },
            content_type: PLAIN,
            body: format!("asked {path}\n"),
        }
    }

    fn text((out, linger): (Vec<u8>, bool)) -> (String, bool) {
        (String::from_utf8(out).unwrap(), linger)
    }

    #[test]
    fn a_get_goes_to_the_route_without_its_query_and_a_head_gets_no_body() {
        let (out, linger) = text(answer(
            &route,
            Head::Complete(b"GET /x?a=1 HTTP/1.1\r\n\r\n"),
        ));
        assert_eq!(
            out,
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 9\r\n\
             Connection: close\r\n\r\nasked /x\n"
        );
        assert!(!linger, "read whole: no lingering");
        let (out, _) = text(answer(&route, Head::Complete(b"HEAD /y HTTP/1.0\n\n")));
        assert!(out.starts_with("HTTP/1.0 404 Not Found\r\n"), "{out}");
        assert!(
            out.ends_with("Content-Length: 9\r\nConnection: close\r\n\r\n"),
            "{out}"
        );
    }

    #[test]
    fn the_server_answers_what_no_route_sees() {
        for (head, status) in [
            (Head::Complete(b"POST /x HTTP/1.1\r\n\r\n"), "405 "),
            (Head::Complete(b"GET x HTTP/1.1\r\n\r\n"), "400 "),
            (Head::Complete(b"GET /x\r\n\r\n"), "400 "),
            (Head::TooLarge, "431 "),
            (Head::TimedOut, "408 "),
        ] {
            let complete = matches!(head, Head::Complete(_));
            let (out, linger) = text(answer(&route, head));
            assert!(out.starts_with(&format!("HTTP/1.0 {status}")), "{out}");
            assert!(!out.contains("asked"), "not routed: {out}");
            assert_eq!(linger, !complete, "{out}");
        }
        let (out, _) = text(answer(&route, Head::Complete(b"PUT /x HTTP/1.1\r\n\r\n")));
        assert!(out.contains("\r\nAllow: GET, HEAD\r\n"), "{out}");
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line_crlf_or_lf() {
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\nrest"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\nHost: a\r\n"), None);
    }
}
