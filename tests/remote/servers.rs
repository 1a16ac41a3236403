//! The servers the remote-cache tests run against, on loopback ports:
//! a real nginx with WebDAV `PUT` (started and stopped by the test, in a
//! folder of its own) and a small fault proxy the test controls, which
//! forwards to nginx after a delay or answers each request wrongly.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where Debian's nginx lives (`bash .ci/run` installs nginx-light).
const NGINX: &str = "/usr/sbin/nginx";

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a loopback port")
        .local_addr()
        .expect("address")
        .port()
}

/// A running nginx serving `root` with `PUT` and `GET`.
pub struct Nginx {
    child: Child,
    pub port: u16,
    pub root: PathBuf,
}

impl Nginx {
    pub fn start(directory: &Path) -> Nginx {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} is missing: install nginx-light (bash .ci/run does)"
        );
        let root = directory.join("store");
        let temporary = directory.join("client-bodies");
        for folder in [&root, &temporary] {
            std::fs::create_dir_all(folder).expect("folder");
            // nginx's workers may run as another user.
            let _ = Command::new("chmod").arg("0777").arg(folder).status();
        }
        let _ = Command::new("chmod").arg("0755").arg(directory).status();
        for attempt in 0..5 {
            let port = free_port();
            let config = directory.join("nginx.conf");
            std::fs::write(
                &config,
                format!(
                    "daemon off;\nworker_processes 1;\npid {pid};\nerror_log {log} warn;\n\
                     events {{ worker_connections 256; }}\n\
                     http {{\n  access_log off;\n  client_body_temp_path {temporary};\n\
                     proxy_temp_path {temporary};\n  fastcgi_temp_path {temporary};\n\
                     uwsgi_temp_path {temporary};\n  scgi_temp_path {temporary};\n\
                     server {{\n    listen 127.0.0.1:{port};\n    root {root};\n\
                     client_max_body_size 2g;\n    location / {{\n      dav_methods PUT;\n\
                     create_full_put_path on;\n      dav_access user:rw group:rw all:r;\n    }}\n  }}\n}}\n",
                    pid = directory.join("nginx.pid").display(),
                    log = directory.join("error.log").display(),
                    temporary = temporary.display(),
                    root = root.display(),
                ),
            )
            .expect("config");
            let child = Command::new(NGINX)
                .arg("-p")
                .arg(directory)
                .arg("-c")
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nginx starts");
            let mut nginx = Nginx {
                child,
                port,
                root: root.clone(),
            };
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = nginx.child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return nginx;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Nginx::stop(&mut nginx.child);
            assert!(
                attempt < 4,
                "nginx did not start: {:?}",
                std::fs::read_to_string(directory.join("error.log"))
            );
        }
        unreachable!("nginx start attempts exhausted")
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/superstep", self.port)
    }

    /// Files the server holds.
    pub fn entries(&self) -> Vec<PathBuf> {
        fn walk(folder: &Path, found: &mut Vec<PathBuf>) {
            if let Ok(entries) = std::fs::read_dir(folder) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        walk(&path, found);
                    } else {
                        found.push(path);
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(&self.root, &mut found);
        found.sort();
        found
    }
}

impl Nginx {
    /// Stops the master and its workers: SIGTERM is nginx's fast shutdown
    /// (a SIGKILL would leave the workers running, orphaned).
    fn stop(child: &mut Child) {
        // Already reaped (its pid may belong to another process by now).
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        Nginx::stop(&mut self.child);
    }
}

/// How the proxy answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward to the upstream after `delay` (each way).
    Forward { delay: Duration },
    /// Accept and close at once.
    Refuse,
    /// 500 to everything.
    ServerError,
    /// 404 to every GET, 201 to every PUT.
    NotFound,
    /// Forward, but cut a GET's body in half.
    Truncated,
    /// 200 with bytes of no cache entry.
    Foreign,
    /// 200 announcing a 64 GiB body.
    Huge,
    /// Never answer (until the client gives up).
    Silent,
}

/// A proxy in front of `upstream` that misbehaves as `fault` says.
pub struct Proxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    pub requests: Arc<AtomicU64>,
}

impl Proxy {
    pub fn start(upstream: u16, fault: Fault) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let (stopping, counted) = (stop.clone(), requests.clone());
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                        let stopping = stopping.clone();
                        std::thread::spawn(move || serve(client, upstream, fault, &stopping));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Proxy {
            port,
            stop,
            requests,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/superstep", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One request from `client`: the head and the body (by Content-Length).
fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position + 4;
        }
        let read = client.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let read = client.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Some((head, body))
}

fn respond(client: &mut TcpStream, status: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = client.write_all(head.as_bytes());
    let _ = client.write_all(body);
}

/// Serves one connection (one request: every answer closes it).
fn serve(mut client: TcpStream, upstream: u16, fault: Fault, stopping: &AtomicBool) {
    if fault == Fault::Refuse {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    let is_get = head.starts_with("GET ");
    match fault {
        Fault::ServerError => return respond(&mut client, "500 Internal Server Error", b"broken"),
        Fault::NotFound if is_get => return respond(&mut client, "404 Not Found", b""),
        Fault::NotFound => return respond(&mut client, "201 Created", b""),
        Fault::Foreign if is_get => {
            return respond(&mut client, "200 OK", b"<html>someone else's bytes</html>");
        }
        Fault::Huge if is_get => {
            let _ = client.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 68719476736\r\nConnection: close\r\n\r\n",
            );
            let zeros = vec![0u8; 1 << 16];
            for _ in 0..64 {
                if client.write_all(&zeros).is_err() {
                    break;
                }
            }
            return;
        }
        Fault::Silent => {
            let started = Instant::now();
            while !stopping.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return;
        }
        _ => {}
    }
    if let Fault::Forward { delay } = fault {
        std::thread::sleep(delay);
    }
    // Forward with `Connection: close`, and relay the whole answer.
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return respond(&mut client, "502 Bad Gateway", b"");
    };
    let mut forwarded: String = head
        .split("\r\n")
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:") && !line.is_empty())
        .map(|line| format!("{line}\r\n"))
        .collect();
    forwarded.push_str("Connection: close\r\n\r\n");
    if server.write_all(forwarded.as_bytes()).is_err() || server.write_all(&body).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    if let Fault::Forward { delay } = fault {
        std::thread::sleep(delay);
    }
    if fault == Fault::Truncated && is_get && answer.starts_with(b"HTTP/1.1 200") {
        answer.truncate(answer.len() - (answer.len() / 4).max(1));
    }
    let _ = client.write_all(&answer);
}
