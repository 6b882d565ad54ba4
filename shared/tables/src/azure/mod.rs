//! The Azure Table service backend (and Azurite, its emulator), over our own thin REST client.
//!
//! Why not the `azure_data_tables` crate: it reports a failed batch as `Ok` and drops the
//! failing index, writes batch bodies with bare LF and no closing delimiter, does not escape
//! quotes in keys, and opens a new connection per request (docs/decisions/0001-own-azure-tables-client.md). The
//! REST surface we need is small, so each concern gets a small module here:
//!
//! - [`connection`]: connection strings → endpoint + [`connection::Credential`];
//! - [`auth`]: the Shared Key signature;
//! - [`transport`]: one pooled `reqwest` client, timeouts, the common headers;
//! - [`urls`]: entity and query URLs with keys quoted and percent-encoded;
//! - [`json`]: entities ↔ JSON with `@odata.type` annotations;
//! - [`batch`]: the `$batch` multipart body and its answer;
//! - [`service_error`]: statuses and error bodies → [`ErrorKind`](super::ErrorKind).
//!
//! Requests reach this backend already checked against Azure's rules by
//! [`Tables`](super::Tables); it does not retry (an `Unavailable` error is the caller's to
//! retry).

pub mod auth;
pub mod batch;
pub mod connection;
pub mod identity;
pub mod json;
pub mod service_error;
pub mod transport;
pub mod urls;

use async_trait::async_trait;
use reqwest::{Method, StatusCode};
use uuid::Uuid;

use self::connection::StorageAccount;
use self::service_error::{ServiceError, error_for};
use self::transport::{Body, Reply, Transport};
use super::{
    BatchOp, Continuation, ETag, Entity, IfMatch, Page, RangeQuery, Result, StoreError, TableBackend, TableName,
    UpdateMode,
};

/// Tables in one Azure storage account (or Azurite). Cloning is cheap and shares the connection
/// pool; make one per process, not one per request.
#[derive(Debug, Clone)]
pub struct AzureTables {
    transport: Transport,
}

impl AzureTables {
    /// Connects (lazily — nothing is sent yet) to the account a connection string names; see
    /// [`connection`] for the accepted forms. A malformed string is `InvalidInput`.
    pub fn from_connection_string(connection_string: &str) -> Result<AzureTables> {
        AzureTables::new(StorageAccount::parse(connection_string)?)
    }

    pub fn new(account: StorageAccount) -> Result<AzureTables> {
        Ok(AzureTables {
            transport: Transport::new(account)?,
        })
    }

    /// Sends and turns any non-success status into an error described by `context`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Body>,
        headers: &[(&'static str, &str)],
        context: impl FnOnce() -> String,
    ) -> Result<Reply> {
        let reply = self.transport.send(method, path, body, headers).await?;
        if reply.status.is_success() {
            Ok(reply)
        } else {
            Err(error_for(reply.status, &reply.body, &context()))
        }
    }

    /// A write whose answer is `204` with the new version in the `ETag` header.
    async fn write(
        &self,
        method: Method,
        path: &str,
        entity: &Entity,
        if_match: Option<&IfMatch>,
        context: impl FnOnce() -> String,
    ) -> Result<ETag> {
        let mut headers = vec![("Prefer", "return-no-content")];
        if let Some(if_match) = if_match {
            headers.push(("If-Match", batch::if_match_value(if_match)));
        }
        let body = Body::json(json::entity_body(entity));
        let reply = self.call(method, path, Some(body), &headers, context).await?;
        etag_header(&reply)
    }
}

fn etag_header(reply: &Reply) -> Result<ETag> {
    reply
        .header("ETag")
        .map(|etag| ETag(etag.to_owned()))
        .ok_or_else(|| StoreError::internal("the table service answered a write without an ETag"))
}

fn merge_method() -> Method {
    Method::from_bytes(b"MERGE").expect("MERGE is a valid method token")
}

fn method_for(mode: UpdateMode) -> Method {
    match mode {
        UpdateMode::Replace => Method::PUT,
        UpdateMode::Merge => merge_method(),
    }
}

#[async_trait]
impl TableBackend for AzureTables {
    async fn create_table(&self, table: &TableName) -> Result<()> {
        let body = Body::json(serde_json::json!({ "TableName": table.as_str() }).to_string());
        let headers = [("Prefer", "return-no-content")];
        let reply = self
            .transport
            .send(Method::POST, urls::tables_path(), Some(body), &headers)
            .await?;
        if reply.status.is_success() {
            return Ok(());
        }
        let already_exists = reply.status == StatusCode::CONFLICT
            && ServiceError::parse(&reply.body).code.as_deref() == Some("TableAlreadyExists");
        if already_exists {
            return Ok(());
        }
        Err(error_for(reply.status, &reply.body, &format!("create table {table}")))
    }

    async fn delete_table(&self, table: &TableName) -> Result<()> {
        self.call(Method::DELETE, &urls::table_path(table), None, &[], || {
            format!("delete table {table}")
        })
        .await
        .map(drop)
    }

    async fn get(&self, table: &TableName, partition_key: &str, row_key: &str) -> Result<Entity> {
        let path = urls::entity_path(table, partition_key, row_key);
        let reply = self
            .call(Method::GET, &path, None, &[], || format!("get from {table}"))
            .await?;
        let mut entity = json::parse_entity(&reply.body)?;
        if let Some(etag) = reply.header("ETag") {
            entity.etag = Some(ETag(etag.to_owned()));
        }
        Ok(entity)
    }

    async fn insert(&self, table: &TableName, entity: &Entity) -> Result<ETag> {
        self.write(Method::POST, &urls::insert_path(table), entity, None, || {
            format!("insert into {table}")
        })
        .await
    }

    async fn update(&self, table: &TableName, entity: &Entity, mode: UpdateMode, if_match: &IfMatch) -> Result<ETag> {
        let path = urls::entity_path(table, &entity.partition_key, &entity.row_key);
        self.write(method_for(mode), &path, entity, Some(if_match), || {
            format!("update in {table}")
        })
        .await
    }

    async fn upsert(&self, table: &TableName, entity: &Entity, mode: UpdateMode) -> Result<ETag> {
        let path = urls::entity_path(table, &entity.partition_key, &entity.row_key);
        self.write(method_for(mode), &path, entity, None, || format!("upsert into {table}"))
            .await
    }

    async fn delete(&self, table: &TableName, partition_key: &str, row_key: &str, if_match: &IfMatch) -> Result<()> {
        let path = urls::entity_path(table, partition_key, row_key);
        let headers = [("If-Match", batch::if_match_value(if_match))];
        self.call(Method::DELETE, &path, None, &headers, || format!("delete from {table}"))
            .await
            .map(drop)
    }

    async fn query(&self, table: &TableName, query: &RangeQuery) -> Result<Page> {
        let path = urls::query_path(table, query);
        let reply = self
            .call(Method::GET, &path, None, &[], || format!("query {table}"))
            .await?;
        let continuation = reply
            .header("x-ms-continuation-NextPartitionKey")
            .filter(|next| !next.is_empty())
            .map(|next| Continuation {
                next_partition_key: next.to_owned(),
                next_row_key: reply
                    .header("x-ms-continuation-NextRowKey")
                    .filter(|row| !row.is_empty())
                    .map(str::to_owned),
            });
        Ok(Page {
            entities: json::parse_entities(&reply.body)?,
            continuation,
        })
    }

    async fn transact(&self, table: &TableName, _partition_key: &str, ops: &[BatchOp]) -> Result<Vec<Option<ETag>>> {
        let built = batch::build(self.transport.endpoint(), table, ops, Uuid::new_v4());
        let body = Body {
            content_type: built.content_type,
            bytes: built.body.into_bytes(),
        };
        let reply = self.transport.send(Method::POST, "/$batch", Some(body), &[]).await?;
        if reply.status != StatusCode::ACCEPTED {
            return Err(batch::rejected(reply.status, &reply.body, ops.len(), table));
        }
        let content_type = reply.header("Content-Type").unwrap_or("");
        let text =
            std::str::from_utf8(&reply.body).map_err(|_| StoreError::internal("the batch response is not UTF-8"))?;
        batch::parse_response(content_type, text, ops, table)
    }
}

#[cfg(test)]
mod tests {
    //! What only the Azure backend has: table lifecycle, authentication and transport errors,
    //! against Azurite (or whatever `TABLETALK_TEST_AZURITE` names). The conformance suite
    //! runs on it through the backend matrix (`crate::conformance`).

    use super::*;
    use crate::ErrorKind;

    /// The account under test, when the backend matrix's rule runs Azurite tests
    /// (`crate::matrix::azurite_account`).
    fn connection_string() -> String {
        crate::matrix::azurite_account().unwrap_or_else(|| "UseDevelopmentStorage=true".into())
    }

    /// The backend, or `None` when the matrix's rule skips Azurite (never under `CI`).
    async fn backend() -> Option<AzureTables> {
        let account = crate::matrix::azurite_account()?;
        Some(AzureTables::from_connection_string(&account).expect("connection string"))
    }

    fn unique(name: &str) -> TableName {
        TableName::parse(format!("{name}{}", &Uuid::new_v4().simple().to_string()[..12])).unwrap()
    }

    #[tokio::test]
    async fn table_lifecycle() {
        let Some(backend) = backend().await else { return };
        let table = unique("life");
        backend.create_table(&table).await.unwrap();
        backend.create_table(&table).await.expect("create is idempotent");
        backend.delete_table(&table).await.unwrap();
        let err = backend.delete_table(&table).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound, "{err}");
        assert!(err.message.contains("delete table"), "{err}");
    }

    #[tokio::test]
    async fn a_wrong_key_is_an_internal_error_naming_the_cause() {
        if backend().await.is_none() {
            return;
        }
        let Ok(account) = StorageAccount::parse(&connection_string()) else {
            return;
        };
        let wrong = StorageAccount {
            credential: connection::Credential::SharedKey {
                account: match &account.credential {
                    connection::Credential::SharedKey { account, .. } => account.clone(),
                    connection::Credential::EntraId(_) => return,
                },
                key: b"not the key".to_vec(),
            },
            ..account
        };
        let err = AzureTables::new(wrong)
            .unwrap()
            .create_table(&unique("denied"))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal, "{err}");
        assert!(err.message.contains("403"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_service_is_unavailable() {
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        let backend = AzureTables::from_connection_string(
            "AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:9/devstoreaccount1",
        )
        .unwrap();
        let err = backend.get(&unique("gone"), "p", "r").await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    }
}
