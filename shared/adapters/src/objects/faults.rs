//! An object store wrapper that injects faults, for tests of failure paths, as
//! `storage::faults` does for tables: fail the Nth call of an operation, or hold it at a gate
//! until the test lets it go (to run another operation in between). It adds this one behaviour
//! to a real backend and is never used to make a test pass — only to make a real store fail or
//! wait where and when a test needs it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use super::{Link, ObjectBackend, ObjectInfo, ObjectKey, unavailable};
use tabletalk_domain::error::Result;

/// A call held until the test releases it.
#[derive(Debug, Default)]
pub struct Gate {
    entered: Notify,
    released: Notify,
}

impl Gate {
    /// Waits until the held call has reached the gate.
    pub async fn entered(&self) {
        self.entered.notified().await;
    }

    /// Lets the held call go on to the store.
    pub fn release(&self) {
        self.released.notify_one();
    }
}

#[derive(Debug)]
enum Effect {
    Fail,
    Hold(Arc<Gate>),
}

#[derive(Debug)]
struct Rule {
    operation: &'static str,
    /// Matching calls still to let through before this one applies.
    skip: usize,
    effect: Effect,
}

/// Wraps a backend and fails or holds calls as told. Clones share their rules.
#[derive(Debug, Clone)]
pub struct FaultyObjects {
    inner: Arc<dyn ObjectBackend>,
    rules: Arc<Mutex<Vec<Rule>>>,
}

impl FaultyObjects {
    pub fn new(inner: impl ObjectBackend) -> FaultyObjects {
        FaultyObjects {
            inner: Arc::new(inner),
            rules: Arc::default(),
        }
    }

    /// Fails the `n`th call (1 = the next) of `operation` (an [`ObjectBackend`] method name).
    pub fn fail_nth(&self, operation: &'static str, n: usize) {
        self.push(operation, n, Effect::Fail);
    }

    /// Holds the `n`th call (1 = the next) of `operation` until the gate is released.
    pub fn hold_nth(&self, operation: &'static str, n: usize) -> Arc<Gate> {
        let gate = Arc::new(Gate::default());
        self.push(operation, n, Effect::Hold(gate.clone()));
        gate
    }

    fn push(&self, operation: &'static str, n: usize, effect: Effect) {
        assert!(n >= 1, "calls are counted from 1");
        self.rules.lock().unwrap_or_else(|p| p.into_inner()).push(Rule {
            operation,
            skip: n - 1,
            effect,
        });
    }

    /// Applies the rule due for this call of `operation`, if any.
    async fn enter(&self, operation: &'static str) -> Result<()> {
        let due = {
            let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
            let mut due = None;
            for (index, rule) in rules.iter_mut().enumerate() {
                if rule.operation != operation {
                    continue;
                }
                if rule.skip == 0 && due.is_none() {
                    due = Some(index);
                } else if rule.skip > 0 {
                    rule.skip -= 1;
                }
            }
            due.map(|index| rules.remove(index).effect)
        };
        match due {
            None => Ok(()),
            Some(Effect::Fail) => Err(unavailable(operation, "injected fault")),
            Some(Effect::Hold(gate)) => {
                gate.entered.notify_one();
                gate.released.notified().await;
                Ok(())
            }
        }
    }
}

#[async_trait]
impl ObjectBackend for FaultyObjects {
    async fn prepare(&self) -> Result<()> {
        self.enter("prepare").await?;
        self.inner.prepare().await
    }

    async fn upload_link(&self, key: &ObjectKey, mime: &str, expires: DateTime<Utc>) -> Result<Link> {
        self.enter("upload_link").await?;
        self.inner.upload_link(key, mime, expires).await
    }

    async fn download_url(
        &self,
        key: &ObjectKey,
        mime: &str,
        file_name: &str,
        expires: DateTime<Utc>,
    ) -> Result<String> {
        self.enter("download_url").await?;
        self.inner.download_url(key, mime, file_name, expires).await
    }

    async fn head(&self, key: &ObjectKey) -> Result<Option<ObjectInfo>> {
        self.enter("head").await?;
        self.inner.head(key).await
    }

    async fn put(&self, key: &ObjectKey, mime: &str, bytes: Vec<u8>) -> Result<()> {
        self.enter("put").await?;
        self.inner.put(key, mime, bytes).await
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Vec<u8>>> {
        self.enter("get").await?;
        self.inner.get(key).await
    }

    async fn delete(&self, key: &ObjectKey) -> Result<()> {
        self.enter("delete").await?;
        self.inner.delete(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectKey>> {
        self.enter("list").await?;
        self.inner.list(prefix).await
    }
}
