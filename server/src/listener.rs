//! Every listener, the API's and `--metrics-listen`'s, plain or TLS, is defended the same
//! way against clients that connect and then hold on:
//!
//! - at most `--max-open-connections` connections are open at once; a connection past
//!   the cap is closed as it arrives (and the log says so), so that a flood of sockets
//!   cannot exhaust the process's file descriptors;
//! - a connection's TLS handshake, its first request's headers and (HTTP/1.1) every later
//!   request's headers must arrive within `--header-timeout`;
//! - a connection with no request in flight for `--idle-timeout` is closed (HTTP/2 has
//!   no header timeout after its first request; this bounds it);
//! - an HTTP/1.1 connection reads at most 128 KiB ahead of its request's handler.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::Server;
use axum_server::accept::Accept;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::Service;

use crate::metrics::Metrics;

/// The timeouts and the cap of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

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

/// The refusal of connections past the cap is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Admits connections up to the cap and makes each close when idle.
#[derive(Debug, Clone)]
pub struct Guard {
    name: &'static str,
    limits: Limits,
    permits: Arc<Semaphore>,
    open: Gauge,
    metrics: Arc<Metrics>,
    started: Instant,
    /// When the refusal was last logged, in milliseconds since `started`, plus one.
    warned: Arc<AtomicU64>,
}

impl Guard {
    /// The guard of the listener `name` (`api`, `metrics`).
    pub fn new(name: &'static str, limits: Limits, metrics: Arc<Metrics>) -> Self {
        Guard {
            name,
            limits,
            permits: Arc::new(Semaphore::new(limits.max_connections)),
            open: metrics.connections(name),
            metrics,
            started: Instant::now(),
            warned: Arc::new(AtomicU64::new(0)),
        }
    }

    fn refuse(&self) -> io::Error {
        self.metrics.connection_refused(self.name);
        let now = self.started.elapsed().as_millis() as u64 + 1;
        let last = self.warned.load(Ordering::Relaxed);
        let due = last == 0 || now - last >= WARN_EVERY.as_millis() as u64;
        if due
            && self
                .warned
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                listener = self.name,
                cap = self.limits.max_connections,
                "connection cap reached (--max-open-connections): new connections are closed \
                 at once until open ones end"
            );
        }
        io::Error::other("connection cap reached")
    }

    /// Applies the header timeouts to `server`, whose acceptor includes this guard.
    pub fn configure<A>(
        &self,
        mut server: Server<std::net::SocketAddr, A>,
    ) -> Server<std::net::SocketAddr, A> {
        server
            .http_builder()
            .http1()
            .header_read_timeout(self.limits.header_timeout)
            .max_buf_size(READ_BUFFER);
        server.first_request_timeout(self.limits.header_timeout)
    }
}

impl<S> Accept<TcpStream, S> for Guard {
    type Stream = Guarded<TcpStream>;
    type Service = Counted<S>;
    type Future = std::future::Ready<io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            return std::future::ready(Err(self.refuse()));
        };
        self.open.inc();
        let activity = Arc::new(Activity::new());
        let stream = Guarded {
            inner: stream,
            idle_check: Box::pin(tokio::time::sleep(self.limits.idle_timeout)),
            idle_timeout: self.limits.idle_timeout,
            activity: Arc::clone(&activity),
            open: self.open.clone(),
            _permit: permit,
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
}

impl Activity {
    fn new() -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
        }
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
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let since = self.0.started.elapsed().as_millis() as u64;
        self.0.idle_since.store(since, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connection's service, counting its requests in flight until they are answered.
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, R> Service<R> for Counted<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let busy = Busy::new(&self.activity);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(busy);
            answer
        })
    }
}

/// An accepted connection: it holds its place under the cap until dropped, and its reads
/// fail once it has been idle for the idle timeout, which makes the server close it.
#[derive(Debug)]
pub struct Guarded<T> {
    inner: T,
    /// Fires at the earliest time the connection could be idle for long enough.
    idle_check: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    activity: Arc<Activity>,
    open: Gauge,
    _permit: OwnedSemaphorePermit,
}

impl<T> Guarded<T> {
    /// Whether the connection has been idle for the idle timeout. The server always has a
    /// read pending on a connection, so polling the check from `poll_read` is enough.
    fn idle_too_long(&mut self, cx: &mut Context<'_>) -> bool {
        while self.idle_check.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            match self.activity.idle_until(self.idle_timeout) {
                Some(until) if until <= now => return true,
                Some(until) => self.idle_check.as_mut().reset(until),
                None => self.idle_check.as_mut().reset(now + self.idle_timeout),
            }
        }
        false
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.idle_too_long(cx) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle longer than --idle-timeout",
            )));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
