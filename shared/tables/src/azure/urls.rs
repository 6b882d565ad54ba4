//! The URLs of the Table REST API, with every user-supplied key escaped.
//!
//! Keys travel inside OData string literals: `table(PartitionKey='..',RowKey='..')` and
//! `$filter=RowKey ge '..'`. A literal's single quotes are doubled, then the whole literal is
//! percent-encoded (everything but RFC 3986 unreserved characters), so quotes, spaces, `%`, `+`,
//! `&` and non-ASCII keys reach the service intact. The `azure_data_tables` crate skipped the
//! first step, which is why a key like `o'brien` could be inserted but never read back.

use std::ops::Bound;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::{RangeQuery, TableName};

/// Everything except RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encodes a URL path segment or query value.
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// An OData string literal's content: single quotes doubled.
pub fn quote_literal(text: &str) -> String {
    text.replace('\'', "''")
}

/// `/Tables`, for creating tables.
pub fn tables_path() -> &'static str {
    "/Tables"
}

/// `/Tables('name')`, for deleting one.
pub fn table_path(table: &TableName) -> String {
    format!("/Tables('{table}')")
}

/// `/name`, where inserts are posted.
pub fn insert_path(table: &TableName) -> String {
    format!("/{table}")
}

/// `/name(PartitionKey='..',RowKey='..')`, one entity.
pub fn entity_path(table: &TableName, partition_key: &str, row_key: &str) -> String {
    format!(
        "/{table}(PartitionKey='{}',RowKey='{}')",
        encode(&quote_literal(partition_key)),
        encode(&quote_literal(row_key))
    )
}

/// `/name()?$filter=..&$top=..[&NextPartitionKey=..[&NextRowKey=..]]`, one page of a range.
pub fn query_path(table: &TableName, query: &RangeQuery) -> String {
    let mut path = format!("/{table}()?$filter={}&$top={}", encode(&range_filter(query)), query.top);
    if let Some(next) = &query.continuation {
        path.push_str("&NextPartitionKey=");
        path.push_str(&encode(&next.next_partition_key));
        if let Some(row_key) = &next.next_row_key {
            path.push_str("&NextRowKey=");
            path.push_str(&encode(row_key));
        }
    }
    path
}

/// `PartitionKey eq '..' [and RowKey ge|gt '..'] [and RowKey le|lt '..']`, unencoded.
pub fn range_filter(query: &RangeQuery) -> String {
    let mut filter = format!("PartitionKey eq '{}'", quote_literal(&query.partition_key));
    let mut bound = |op: &str, key: &str| {
        filter.push_str(&format!(" and RowKey {op} '{}'", quote_literal(key)));
    };
    match &query.from {
        Bound::Included(key) => bound("ge", key),
        Bound::Excluded(key) => bound("gt", key),
        Bound::Unbounded => {}
    }
    match &query.to {
        Bound::Included(key) => bound("le", key),
        Bound::Excluded(key) => bound("lt", key),
        Bound::Unbounded => {}
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Continuation;

    fn table() -> TableName {
        TableName::parse("rooms").unwrap()
    }

    #[test]
    fn entity_keys_are_quoted_then_encoded() {
        assert_eq!(
            entity_path(&table(), "o'brien", "a b+c&d%e"),
            "/rooms(PartitionKey='o%27%27brien',RowKey='a%20b%2Bc%26d%25e')"
        );
        assert_eq!(
            entity_path(&table(), "naïve", "日本"),
            "/rooms(PartitionKey='na%C3%AFve',RowKey='%E6%97%A5%E6%9C%AC')"
        );
        assert_eq!(entity_path(&table(), "", ""), "/rooms(PartitionKey='',RowKey='')");
    }

    #[test]
    fn range_filters() {
        let query = RangeQuery::partition("it's", 10)
            .from(Bound::Excluded("a'".into()))
            .to(Bound::Included("z".into()));
        assert_eq!(
            range_filter(&query),
            "PartitionKey eq 'it''s' and RowKey gt 'a''' and RowKey le 'z'"
        );
        assert_eq!(
            range_filter(&RangeQuery::prefix("p", "ab", 5)),
            "PartitionKey eq 'p' and RowKey ge 'ab' and RowKey lt 'ac'"
        );
        assert_eq!(range_filter(&RangeQuery::partition("p", 5)), "PartitionKey eq 'p'");
    }

    #[test]
    fn query_path_encodes_the_filter_and_the_continuation() {
        let mut query = RangeQuery::partition("p q", 7);
        assert_eq!(
            query_path(&table(), &query),
            "/rooms()?$filter=PartitionKey%20eq%20%27p%20q%27&$top=7"
        );
        query.continuation = Some(Continuation {
            next_partition_key: "cA==".into(),
            next_row_key: Some("1!8+/x".into()),
        });
        assert!(
            query_path(&table(), &query).ends_with("&$top=7&NextPartitionKey=cA%3D%3D&NextRowKey=1%218%2B%2Fx"),
            "{}",
            query_path(&table(), &query)
        );
    }
}
