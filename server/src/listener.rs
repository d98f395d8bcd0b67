//! Every listener, the API's and `--metrics-listen`'s, plain or TLS, is defended the same
//! way against clients that connect and then hold on:
//!
//! - at most `--max-open-connections` connections are open at once, and at most
//!   `--max-connections-per-peer` from one address. At either cap, the connection (of that
//!   address, for its cap) unused longest is closed to make room, whether or not it was
//!   ever answered: one with no request in flight and none answered for 1 s (0.1 s for a
//!   socket that never spoke), where probes, scrapes and requests refused `401` or `403`
//!   are no use. Only when there is none is the newcomer closed as it arrives (and the
//!   log says so). So a flood of sockets, idle or busy with probes or refused requests,
//!   can neither exhaust the process's file descriptors nor lock out clients that use
//!   their connections;
//! - with TLS, a peer starts at most `--max-tls-handshakes-per-peer` handshakes a second
//!   after a burst of its connection cap (`listener/handshakes.rs`): past it, its new connections
//!   are closed as they arrive, before the handshake costs anything;
//! - a connection must send its first byte within 3 s (or `--header-timeout`, if
//!   shorter): every real client speaks at once;
//! - a connection's TLS handshake, its first request's headers and (HTTP/1.1) every later
//!   request's headers must arrive within `--header-timeout`;
//! - a connection with no request in flight for `--idle-timeout` is closed (HTTP/2 has
//!   no header timeout after its first request; this bounds it), and so is one whose
//!   client has read nothing of its answers for as long: every answer has a deadline;
//! - an HTTP/2 connection carries at most 32 requests at once;
//! - an HTTP/1.1 connection reads at most 128 KiB ahead of its request's handler.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{Request, Response};
use axum_server::Server;
use axum_server::accept::Accept;
use futures_util::task::AtomicWaker;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tower::Service;

use crate::metrics::Metrics;
use handshakes::Handshakes;

mod handshakes;

/// The timeouts and the caps of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub max_per_peer: usize,
    /// New TLS connections a second from one address; 0: no limit (or no TLS).
    pub handshakes_per_peer: u32,
}

/// Requests at once on one HTTP/2 connection: each may hold an answer of up to 8 MiB.
const MAX_STREAMS: u32 = 32;

/// How long a new connection may stay silent: a client that connects speaks at once.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a connection may go unused (no request in flight, none of use answered) before
/// it may be closed to make room for another: not one that is still sending its first
/// headers, nor a client's between two requests.
const UNUSED_AFTER: Duration = Duration::from_secs(1);

/// Routes whose requests are no use of a connection: kubelet's probes and Prometheus's
/// scrapes, which a stranger may send without a token to keep sockets looking busy.
const NO_USE: [&str; 3] = ["/healthz", "/readyz", "/metrics"];
/// The same for a connection that has sent nothing at all.
const SILENT_AFTER: Duration = Duration::from_millis(100);

/// What an HTTP/1.1 connection reads ahead of its handler, at most (hyper's default is
/// 400 KiB): headers must fit (a token past 16 KiB still reaches the check that refuses it
/// by name), and a body is taken from it as
/// it arrives, so a flood of connections holds little memory besides the bodies'.
const READ_BUFFER: usize = 128 << 10;

/// Binds a listener whose kernel accept queue holds as many connections as may be open:
/// with the default (128), a burst of connections past it waits in the kernel unseen, and
/// one that then sends nothing is never accepted, so no timeout of ours can end it.
pub fn bind(
    addr: std::net::SocketAddr,
    max_connections: usize,
) -> io::Result<std::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let backlog = u32::try_from(max_connections).unwrap_or(u32::MAX).max(128);
    socket.listen(backlog)?.into_std()
}

/// `limits` with the connection cap lowered to what the process's open-file limit leaves
/// after `reserved` descriptors, so that the cap, not the kernel's EMFILE, refuses
/// connections (and says so); the per-peer cap is kept within it.
pub fn fit_open_files(limits: Limits, reserved: usize) -> Limits {
    let Some(files) = crate::metrics::process::open_files_limit() else {
        return limits;
    };
    let room = files.saturating_sub(reserved).max(16);
    if limits.max_connections <= room {
        return limits;
    }
    tracing::warn!(
        max_open_connections = limits.max_connections,
        open_files = files,
        clamped_to = room,
        "--max-open-connections does not fit the open-file limit (ulimit -n) with the \
         descriptors the server needs besides: lowered"
    );
    Limits {
        max_connections: room,
        max_per_peer: limits.max_per_peer.min(room),
        ..limits
    }
}

/// The refusal of connections past the cap is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Admits connections up to the caps and makes each close when idle.
#[derive(Debug, Clone)]
pub struct Guard {
    name: &'static str,
    limits: Limits,
    open: Arc<Mutex<Open>>,
    gauge: Gauge,
    metrics: Arc<Metrics>,
    /// `None` without TLS or with `--max-tls-handshakes-per-peer 0`.
    handshakes: Option<Arc<Handshakes>>,
    started: Instant,
    /// When a refusal was last logged, in milliseconds since `started`, plus one.
    warned: Arc<AtomicU64>,
}

/// The connections open on one listener, oldest first, and how many each peer holds.
#[derive(Debug, Default)]
struct Open {
    next: u64,
    connections: BTreeMap<u64, (IpAddr, Arc<Activity>)>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Open {
    fn remove(&mut self, id: u64) {
        let Some((peer, _)) = self.connections.remove(&id) else {
            return;
        };
        if let Some(count) = self.per_peer.get_mut(&peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&peer);
            }
        }
    }

    /// The connection (of `peer`, if given) unused longest, if one is unused long enough
    /// to be closed when room is needed ([`Activity::unused_for`]).
    fn unused_longest(&self, peer: Option<IpAddr>) -> Option<u64> {
        self.connections
            .iter()
            .filter(|(_, (from, _))| peer.is_none_or(|peer| *from == peer))
            .filter_map(|(id, (_, activity))| Some((activity.unused_for()?, *id)))
            .max()
            .map(|(_, id)| id)
    }

    /// Closes connection `id` to make room.
    fn evict(&mut self, id: u64) {
        if let Some((_, activity)) = self.connections.get(&id) {
            activity.close();
        }
        self.remove(id);
    }
}

/// Why a connection was closed as it arrived.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// `--max-open-connections`, every open connection in use.
    Full,
    /// `--max-connections-per-peer`.
    Peer,
    /// `--max-tls-handshakes-per-peer`.
    Handshakes,
}

impl Guard {
    /// The guard of the listener `name` (`api`, `metrics`).
    pub fn new(name: &'static str, limits: Limits, metrics: Arc<Metrics>) -> Self {
        Guard {
            name,
            limits,
            open: Arc::default(),
            gauge: metrics.connections(name),
            metrics,
            handshakes: (limits.handshakes_per_peer > 0).then(|| {
                Arc::new(Handshakes::new(
                    limits.handshakes_per_peer,
                    limits.max_per_peer,
                ))
            }),
            started: Instant::now(),
            warned: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Whether the listener is full of connections in use, so that a newcomer would be
    /// closed (none unused long enough to make room): the replica cannot serve, and should
    /// leave the Service until it can.
    pub fn saturated(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.connections.len() >= self.limits.max_connections && open.unused_longest(None).is_none()
    }

    /// Logs `what` at most every [`WARN_EVERY`] across this listener's warnings.
    fn warn_now(&self) -> bool {
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.warned.load(Ordering::Relaxed);
        let due = last == 0 || now - last >= WARN_EVERY.as_millis() as u64;
        due && self
            .warned
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    fn refuse(&self, why: Refused, peer: IpAddr) -> io::Error {
        self.metrics.connection_refused(self.name);
        if self.warn_now() {
            match why {
                Refused::Full => tracing::warn!(
                    listener = self.name,
                    cap = self.limits.max_connections,
                    "connection cap reached (--max-open-connections) with every connection in \
                     use: new connections are closed at once until open ones end"
                ),
                Refused::Peer => tracing::warn!(
                    listener = self.name,
                    %peer,
                    cap = self.limits.max_per_peer,
                    "a peer holds --max-connections-per-peer connections: its new ones are \
                     closed at once"
                ),
                Refused::Handshakes => tracing::warn!(
                    listener = self.name,
                    %peer,
                    rate = self.limits.handshakes_per_peer,
                    "a peer opens TLS connections faster than --max-tls-handshakes-per-peer: \
                     its new ones are closed at once"
                ),
            }
        }
        io::Error::other("connection cap reached")
    }

    /// Logs a failed accept (the kernel's, a handshake's, or a refusal), at most every
    /// [`WARN_EVERY`]: a flood must not flood the log too.
    pub fn accept_failed(&self, error: &io::Error) {
        if self.warn_now() {
            tracing::warn!(listener = self.name, %error, "a connection could not be accepted");
        }
    }

    /// Registers a connection from `peer`, making room by closing the one unused longest at
    /// the cap; its id, or why it is refused.
    fn admit(&self, peer: IpAddr, activity: &Arc<Activity>) -> Result<u64, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_per_peer {
            let oldest = open.unused_longest(Some(peer)).ok_or(Refused::Peer)?;
            open.evict(oldest);
            self.metrics.connection_evicted(self.name);
        }
        if open.connections.len() >= self.limits.max_connections {
            let oldest = open.unused_longest(None).ok_or(Refused::Full)?;
            open.evict(oldest);
            self.metrics.connection_evicted(self.name);
        }
        let id = open.next;
        open.next += 1;
        open.connections.insert(id, (peer, Arc::clone(activity)));
        *open.per_peer.entry(peer).or_default() += 1;
        Ok(id)
    }

    /// Applies the header timeouts to `server`, whose acceptor includes this guard, and
    /// logs its failed accepts.
    /// The time a connection has for its TLS handshake and its first request's headers.
    pub fn header_timeout(&self) -> Duration {
        self.limits.header_timeout
    }

    pub fn configure<A>(
        &self,
        mut server: Server<std::net::SocketAddr, A>,
    ) -> Server<std::net::SocketAddr, A> {
        let builder = server.http_builder();
        builder
            .http1()
            .header_read_timeout(self.limits.header_timeout)
            .max_buf_size(READ_BUFFER);
        builder.http2().max_concurrent_streams(MAX_STREAMS);
        let guard = self.clone();
        server
            .first_request_timeout(self.limits.header_timeout)
            .accept_error_handler(move |_, error| guard.accept_failed(error))
    }
}

impl<S> Accept<TcpStream, S> for Guard {
    type Stream = Guarded<TcpStream>;
    type Service = Counted<S>;
    type Future = std::future::Ready<io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let peer = match stream.peer_addr() {
            Ok(address) => address.ip(),
            Err(error) => return std::future::ready(Err(error)),
        };
        // Answers leave as they are written. With Nagle's algorithm on, a TLS answer's
        // second record waited for the client's delayed ACK: 40 ms more for every pod.
        if let Err(error) = stream.set_nodelay(true) {
            return std::future::ready(Err(error));
        }
        if let Some(handshakes) = &self.handshakes
            && !handshakes.admit(peer)
        {
            return std::future::ready(Err(self.refuse(Refused::Handshakes, peer)));
        }
        let activity = Arc::new(Activity::new());
        let id = match self.admit(peer, &activity) {
            Ok(id) => id,
            Err(why) => return std::future::ready(Err(self.refuse(why, peer))),
        };
        self.gauge.inc();
        let first_byte = FIRST_BYTE_TIMEOUT.min(self.limits.header_timeout);
        let stream = Guarded {
            inner: stream,
            idle_check: Box::pin(tokio::time::sleep(first_byte)),
            idle_timeout: self.limits.idle_timeout,
            first_byte,
            write_check: Box::pin(tokio::time::sleep(self.limits.idle_timeout)),
            stalled_since: None,
            activity: Arc::clone(&activity),
            _place: Place {
                id,
                open: Arc::clone(&self.open),
                gauge: self.gauge.clone(),
            },
        };
        std::future::ready(Ok((
            stream,
            Counted {
                inner: service,
                activity,
            },
        )))
    }
}

/// Requests in flight on one connection, and since when it has had none.
#[derive(Debug)]
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `started` to the end of the last request.
    idle_since: AtomicU64,
    /// Milliseconds from `started` to the end of the last request of use (not a probe, not
    /// refused `401` or `403`), plus one; 0 before the first.
    used_at: AtomicU64,
    /// A byte arrived.
    spoke: AtomicBool,
    /// The guard closed it to make room.
    closed: AtomicBool,
    /// The task reading the connection, to wake when it is closed.
    reader: AtomicWaker,
}

impl Activity {
    fn new() -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            used_at: AtomicU64::new(0),
            spoke: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            reader: AtomicWaker::new(),
        }
    }

    /// How long it has gone unused, if no request is in flight and that is long enough to
    /// close it when room is needed: [`UNUSED_AFTER`] since its last request of use (or
    /// since it opened), or [`SILENT_AFTER`] since it opened for one that never spoke (a
    /// real client speaks at once).
    fn unused_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let used_at = self.used_at.load(Ordering::SeqCst);
        let since = Duration::from_millis(used_at.saturating_sub(1));
        let unused = self.started.elapsed().saturating_sub(since);
        let enough = if used_at == 0 && !self.spoke.load(Ordering::SeqCst) {
            SILENT_AFTER
        } else {
            UNUSED_AFTER
        };
        (unused >= enough).then_some(unused)
    }

    /// Closes the connection: its next read fails, and its reader is woken to make it.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.reader.wake();
    }

    /// When the connection, idle now, may be closed; `None` while a request is in flight.
    fn idle_until(&self, idle_timeout: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since.load(Ordering::SeqCst));
        Some(self.started + since + idle_timeout)
    }
}

/// A request in flight on its connection until dropped.
#[derive(Debug)]
struct Busy {
    activity: Arc<Activity>,
    /// Whether it was of use ([`NO_USE`], `401`, `403`), known once it is answered.
    of_use: bool,
}

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy {
            activity: Arc::clone(activity),
            of_use: false,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let activity = &self.activity;
        let since = activity.started.elapsed().as_millis() as u64;
        activity.idle_since.store(since, Ordering::SeqCst);
        if self.of_use {
            activity.used_at.store(since + 1, Ordering::SeqCst);
        }
        activity.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connection's service, counting its requests in flight until they are answered, and
/// noting which were of use.
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, B, A> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<A>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let probe = NO_USE.contains(&request.uri().path());
        let mut busy = Busy::new(&self.activity);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            if let Ok(response) = &answer {
                let refused = matches!(response.status().as_u16(), 401 | 403);
                busy.of_use = !probe && !refused;
            }
            drop(busy);
            answer
        })
    }
}

/// A connection's place on its listener, given back when it is dropped.
#[derive(Debug)]
struct Place {
    id: u64,
    open: Arc<Mutex<Open>>,
    gauge: Gauge,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.id);
        self.gauge.dec();
    }
}

/// An accepted connection: it holds its place under the caps until dropped, and its reads
/// fail once it has been silent past its first-byte timeout, idle for the idle timeout, or
/// closed by the guard to make room, which makes the server close it.
#[derive(Debug)]
pub struct Guarded<T> {
    inner: T,
    /// Fires at the earliest time the connection could be silent or idle for too long.
    idle_check: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    first_byte: Duration,
    /// Fires when a write has waited on its client for the idle timeout.
    write_check: Pin<Box<Sleep>>,
    /// Since when writes have waited on the client, if they do.
    stalled_since: Option<Instant>,
    activity: Arc<Activity>,
    _place: Place,
}

impl<T> Guarded<T> {
    /// Why the connection must close now, if it must. The server always has a read pending
    /// on a connection, so checking from `poll_read` is enough.
    fn must_close(&mut self, cx: &mut Context<'_>) -> Option<&'static str> {
        let activity = &self.activity;
        // Lock-free: this runs on every read of every connection.
        activity.reader.register(cx.waker());
        if activity.closed.load(Ordering::SeqCst) {
            return Some("closed to make room for a new connection (--max-open-connections)");
        }
        while self.idle_check.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            if !self.activity.spoke.load(Ordering::SeqCst) {
                if now >= self.activity.started + self.first_byte {
                    return Some("no byte arrived within the first-byte timeout");
                }
                let until = self.activity.started + self.first_byte;
                self.idle_check.as_mut().reset(until);
                continue;
            }
            match self.activity.idle_until(self.idle_timeout) {
                Some(until) if until <= now => return Some("idle longer than --idle-timeout"),
                Some(until) => self.idle_check.as_mut().reset(until),
                None => self.idle_check.as_mut().reset(now + self.idle_timeout),
            }
        }
        None
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(why) = self.must_close(cx) {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.spoke.store(true, Ordering::SeqCst);
        }
        read
    }
}

impl<T> Guarded<T> {
    /// `written`, or an error once writes have waited on the client for the idle timeout:
    /// a client that reads nothing keeps its answer in memory, so it has a deadline.
    fn deadline<R>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if written.is_ready() {
            self.stalled_since = None;
            return written;
        }
        let now = Instant::now();
        let since = *self.stalled_since.get_or_insert_with(|| {
            self.write_check.as_mut().reset(now + self.idle_timeout);
            now
        });
        if now >= since + self.idle_timeout {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of its answer for --idle-timeout",
            )));
        }
        // Wakes the writer at the deadline, whatever the socket does.
        let _ = self.write_check.as_mut().poll(cx);
        Poll::Pending
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.deadline(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.deadline(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.deadline(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let _client = TcpStream::connect(address).await.expect("connect");
        let (accepted, _) = listener.accept().await.expect("accept");
        assert!(
            !accepted.nodelay().expect("TCP_NODELAY"),
            "the kernel's default"
        );
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 8,
            max_per_peer: 8,
            handshakes_per_peer: 0,
        };
        let guard = Guard::new("api", limits, Arc::new(Metrics::new()));
        let (stream, _) = guard.accept(accepted, ()).await.expect("admitted");
        assert!(stream.inner.nodelay().expect("TCP_NODELAY"));
    }
}
