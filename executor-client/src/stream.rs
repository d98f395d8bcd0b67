//! Pages and the feed as streams.

use std::collections::VecDeque;

use argo_results_proto::{FeedItem, NodeResult, ProblemCode};
use futures_util::Stream;
use futures_util::stream;

use crate::{Client, ClientError, FeedOptions, ListOptions};

/// What a watch sees.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// The next change, in revision order.
    Change(FeedItem),
    /// History before `revision` was pruned (`410 gone`): re-list the state you keep, then
    /// the watch goes on from `revision`.
    Reset { revision: i64 },
}

struct Pages {
    client: Client,
    namespace: String,
    workflow: String,
    options: ListOptions,
    pending: VecDeque<NodeResult>,
    done: bool,
}

struct Watch {
    client: Client,
    options: FeedOptions,
    pending: VecDeque<FeedItem>,
    done: bool,
}

impl Client {
    /// Every result of a workflow, following `continue` tokens page by page.
    pub fn list_all(
        &self,
        namespace: &str,
        workflow: &str,
        options: ListOptions,
    ) -> impl Stream<Item = Result<NodeResult, ClientError>> + Send + 'static {
        let pages = Pages {
            client: self.clone(),
            namespace: namespace.to_owned(),
            workflow: workflow.to_owned(),
            options,
            pending: VecDeque::new(),
            done: false,
        };
        stream::unfold(pages, |mut pages| async move {
            loop {
                if let Some(item) = pages.pending.pop_front() {
                    return Some((Ok(item), pages));
                }
                if pages.done {
                    return None;
                }
                match pages
                    .client
                    .list_results(&pages.namespace, &pages.workflow, &pages.options)
                    .await
                {
                    Ok(page) => {
                        pages.pending.extend(page.items);
                        pages.done = page.continue_token.is_none();
                        pages.options.continue_token = page.continue_token;
                    }
                    Err(error) => {
                        pages.done = true;
                        return Some((Err(error), pages));
                    }
                }
            }
        })
    }

    /// Follows the feed from `options.since` without end, each change once and in order.
    /// With a retry policy, connection failures and restarts of the server are waited out
    /// and the watch resumes from the last revision it saw; other errors end the stream.
    pub fn watch(
        &self,
        mut options: FeedOptions,
    ) -> impl Stream<Item = Result<WatchEvent, ClientError>> + Send + 'static {
        options.watch = true;
        let watch = Watch {
            client: self.clone(),
            options,
            pending: VecDeque::new(),
            done: false,
        };
        stream::unfold(watch, |mut watch| async move {
            loop {
                if let Some(item) = watch.pending.pop_front() {
                    return Some((Ok(WatchEvent::Change(item)), watch));
                }
                if watch.done {
                    return None;
                }
                match watch.client.feed(&watch.options).await {
                    Ok(page) => {
                        // The items are handed out before the next request, which resumes
                        // after them.
                        watch.options.since = page.revision;
                        watch.pending.extend(page.items);
                    }
                    Err(error) if error.code() == Some(ProblemCode::Gone) => {
                        let revision = error.problem().and_then(|p| p.revision).unwrap_or(0);
                        watch.options.since = revision;
                        return Some((Ok(WatchEvent::Reset { revision }), watch));
                    }
                    Err(error) => {
                        watch.done = true;
                        return Some((Err(error), watch));
                    }
                }
            }
        })
    }
}
