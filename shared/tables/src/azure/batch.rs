//! Entity group transactions: the `$batch` request body and the reading of its answer.
//!
//! The body is `multipart/mixed` as the Table service documents it: one batch part holding one
//! changeset, each operation a `application/http` part with an absolute request line, its own
//! headers and JSON body, `Content-ID: n` (1-based), every line ending in CRLF, and both closing
//! delimiters (`--changeset_..--`, `--batch_..--`). Written by hand because the only Rust client
//! that does this (`azure_data_tables`) uses bare LF and omits the closing delimiter.
//!
//! The answer is `202 Accepted` even when the transaction failed, so the parts decide: on
//! success one part per operation, each with a status and (except deletes) an `ETag`; on
//! failure a single part whose status is the failing operation's and whose error message starts
//! with `N:`, the 0-based index of that operation (the echoed `Content-ID` is the fallback). A
//! failure is always an `Err` carrying that index: nothing of the batch was applied.

use reqwest::StatusCode;
use uuid::Uuid;

use super::json::entity_body;
use super::service_error::{ServiceError, error_for};
use super::urls;
use crate::{BatchOp, ETag, IfMatch, Result, StoreError, TableName, UpdateMode};

/// Sent to the service; the accept header inside each part.
const PART_ACCEPT: &str = "application/json;odata=minimalmetadata";

/// A `$batch` request body and the `Content-Type` that names its boundary.
#[derive(Debug)]
pub struct BatchBody {
    pub content_type: String,
    pub body: String,
}

/// Builds the body for `ops` on `table`; `endpoint` is the table service's base URL (the parts
/// carry absolute URLs), `id` makes the boundaries unique.
pub fn build(endpoint: &str, table: &TableName, ops: &[BatchOp], id: Uuid) -> BatchBody {
    let batch = format!("batch_{id}");
    let changeset = format!("changeset_{id}");
    let mut body = String::new();
    body.push_str(&format!(
        "--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
    ));
    for (index, op) in ops.iter().enumerate() {
        body.push_str(&format!("--{changeset}\r\n"));
        body.push_str("Content-Type: application/http\r\n");
        body.push_str("Content-Transfer-Encoding: binary\r\n");
        body.push_str(&format!("Content-ID: {}\r\n\r\n", index + 1));
        write_request(&mut body, endpoint, table, op);
        // The CRLF before a delimiter belongs to the delimiter, not to the part.
        body.push_str("\r\n");
    }
    body.push_str(&format!("--{changeset}--\r\n--{batch}--\r\n"));
    BatchBody {
        content_type: format!("multipart/mixed; boundary={batch}"),
        body,
    }
}

/// One operation as an HTTP request: request line, headers, blank line, body.
fn write_request(out: &mut String, endpoint: &str, table: &TableName, op: &BatchOp) {
    let (pk, rk) = op.keys();
    let entity_url = format!("{endpoint}{}", urls::entity_path(table, pk, rk));
    let (method, url, if_match, entity) = match op {
        BatchOp::Insert(entity) => (
            "POST",
            format!("{endpoint}{}", urls::insert_path(table)),
            None,
            Some(entity),
        ),
        BatchOp::Update { entity, mode, if_match } => (verb(*mode), entity_url, Some(if_match), Some(entity)),
        BatchOp::Upsert { entity, mode } => (verb(*mode), entity_url, None, Some(entity)),
        BatchOp::Delete { if_match, .. } => ("DELETE", entity_url, Some(if_match), None),
    };
    out.push_str(&format!("{method} {url} HTTP/1.1\r\n"));
    out.push_str(&format!("Accept: {PART_ACCEPT}\r\n"));
    out.push_str("DataServiceVersion: 3.0;\r\n");
    if let Some(if_match) = if_match {
        out.push_str(&format!("If-Match: {}\r\n", if_match_value(if_match)));
    }
    match entity {
        Some(entity) => {
            out.push_str("Content-Type: application/json\r\n");
            out.push_str("Prefer: return-no-content\r\n\r\n");
            // serde_json escapes control characters, so the JSON is one line with no bare LF.
            out.push_str(&entity_body(entity));
        }
        None => out.push_str("\r\n"),
    }
}

/// `PUT` replaces, `MERGE` merges.
pub fn verb(mode: UpdateMode) -> &'static str {
    match mode {
        UpdateMode::Replace => "PUT",
        UpdateMode::Merge => "MERGE",
    }
}

/// The `If-Match` header value.
pub fn if_match_value(if_match: &IfMatch) -> &str {
    match if_match {
        IfMatch::Any => "*",
        IfMatch::Etag(etag) => &etag.0,
    }
}

/// One operation's answer inside the batch response.
#[derive(Debug)]
struct PartResponse<'a> {
    status: StatusCode,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a str,
}

impl PartResponse<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// Reads a `202` batch response: the new ETags (`None` for deletes), or the failing operation's
/// error with its index.
pub fn parse_response(content_type: &str, body: &str, ops: &[BatchOp], table: &TableName) -> Result<Vec<Option<ETag>>> {
    let parts = response_parts(content_type, body)?;
    let context = format!("batch on {table}");
    if let Some((position, failed)) = parts.iter().enumerate().find(|(_, p)| !p.status.is_success()) {
        return Err(batch_failure(failed, position, parts.len(), ops.len(), &context));
    }
    if parts.len() != ops.len() {
        return Err(malformed(format!(
            "{} operations were sent but {} answered",
            ops.len(),
            parts.len()
        )));
    }
    ops.iter()
        .zip(&parts)
        .enumerate()
        .map(|(index, (op, part))| match op {
            BatchOp::Delete { .. } => Ok(None),
            _ => part
                .header("ETag")
                .map(|etag| Some(ETag(etag.to_owned())))
                .ok_or_else(|| malformed(format!("operation {index} succeeded without an ETag"))),
        })
        .collect()
}

/// The error for a batch the service refused as a whole (any status but `202`): kind from the
/// status, and the operation's index when the message starts with one.
pub fn rejected(status: StatusCode, body: &[u8], ops: usize, table: &TableName) -> StoreError {
    let error = error_for(status, body, &format!("batch on {table}"));
    match ServiceError::parse(body).batch_index().filter(|&index| index < ops) {
        Some(index) => error.at_batch_index(index),
        None => error,
    }
}

/// The error for the failed part. Its index comes from the message's `N:` prefix, else from the
/// echoed Content-ID, else — when the service answered per operation — from its position.
fn batch_failure(part: &PartResponse<'_>, position: usize, answered: usize, sent: usize, context: &str) -> StoreError {
    let service = ServiceError::parse(part.body.as_bytes());
    let index = service
        .batch_index()
        .or_else(|| {
            part.header("Content-ID")
                .and_then(|id| id.trim().parse::<usize>().ok())
                .and_then(|id| id.checked_sub(1))
        })
        .or((answered == sent).then_some(position))
        .or((sent == 1).then_some(0))
        .filter(|&index| index < sent);
    let error = error_for(part.status, part.body.as_bytes(), context);
    match index {
        Some(index) => error.at_batch_index(index),
        None => error,
    }
}

/// The operation responses inside the batch's changeset.
fn response_parts<'a>(content_type: &str, body: &'a str) -> Result<Vec<PartResponse<'a>>> {
    let outer = boundary(content_type).ok_or_else(|| malformed("the response names no multipart boundary"))?;
    let mut responses = Vec::new();
    for batch_part in split_multipart(body, outer)? {
        let (headers, content) = split_head(batch_part);
        let part_type = header(&headers, "Content-Type").unwrap_or("");
        if part_type.starts_with("multipart/mixed") {
            let changeset = boundary(part_type).ok_or_else(|| malformed("a changeset names no boundary"))?;
            for part in split_multipart(content, changeset)? {
                responses.push(parse_part(part)?);
            }
        } else {
            // A failure outside any changeset (a malformed request): a bare HTTP response.
            responses.push(parse_part(batch_part)?);
        }
    }
    if responses.is_empty() {
        return Err(malformed("the response holds no operation"));
    }
    Ok(responses)
}

/// An `application/http` part: MIME headers, then an HTTP response.
fn parse_part(part: &str) -> Result<PartResponse<'_>> {
    let (mime_headers, http) = split_head(part);
    let (status_line, rest) = http.split_once('\n').unwrap_or((http, ""));
    let status = status_line
        .trim_end_matches('\r')
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| malformed(format!("a part has no HTTP status line ({status_line:?})")))?;
    let (mut headers, body) = split_head(rest);
    // Content-ID may sit on either side; keep the MIME one as a fallback.
    headers.extend(mime_headers);
    Ok(PartResponse { status, headers, body })
}

/// The content of each part between `--boundary` delimiters, up to `--boundary--`. Tolerates
/// LF line ends on the way in (we only promise CRLF on the way out).
fn split_multipart<'a>(body: &'a str, boundary: &str) -> Result<Vec<&'a str>> {
    let delimiter = format!("--{boundary}");
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(found) = body[from..].find(&delimiter) {
        let at = from + found;
        if at == 0 || body.as_bytes()[at - 1] == b'\n' {
            starts.push(at);
        }
        from = at + delimiter.len();
    }
    let mut parts = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let after = start + delimiter.len();
        if body[after..].starts_with("--") {
            return Ok(parts);
        }
        let Some(&next) = starts.get(n + 1) else { break };
        let content_start = body[after..].find('\n').map_or(next, |i| (after + i + 1).min(next));
        let content = &body[content_start..next];
        let content = content.strip_suffix('\n').unwrap_or(content);
        parts.push(content.strip_suffix('\r').unwrap_or(content));
    }
    Err(malformed(format!("the multipart body has no closing --{boundary}--")))
}

/// Headers up to the first blank line, and what follows.
fn split_head(text: &str) -> (Vec<(&str, &str)>, &str) {
    let mut headers = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, next) = rest.split_once('\n').unwrap_or((rest, ""));
        rest = next;
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim(), value.trim()));
        }
    }
    (headers, rest)
}

fn header<'a>(headers: &[(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// The `boundary` parameter of a multipart content type, quotes removed.
fn boundary(content_type: &str) -> Option<&str> {
    content_type.split(';').find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"'))
    })
}

fn malformed(message: impl Into<String>) -> StoreError {
    StoreError::internal(format!("unexpected batch response: {}", message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entity, ErrorKind, Value};

    const ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

    fn table() -> TableName {
        TableName::parse("rooms").unwrap()
    }

    fn ops() -> Vec<BatchOp> {
        vec![
            BatchOp::Insert(Entity::new("p", "o'brien").with("text", Value::String("line1\nline2".into()))),
            BatchOp::Update {
                entity: Entity::new("p", "b c").with("n", Value::Int64(2)),
                mode: UpdateMode::Merge,
                if_match: IfMatch::Etag(ETag("W/\"datetime'2026-11-30T09%3A31%3A41.0638519Z'\"".into())),
            },
            BatchOp::Upsert {
                entity: Entity::new("p", "u"),
                mode: UpdateMode::Replace,
            },
            BatchOp::Delete {
                partition_key: "p".into(),
                row_key: "d".into(),
                if_match: IfMatch::Any,
            },
        ]
    }

    fn id() -> Uuid {
        Uuid::from_u128(0xabc)
    }

    #[test]
    fn body_is_crlf_only_and_closed() {
        let built = build(ENDPOINT, &table(), &ops(), id());
        let body = &built.body;
        assert_eq!(
            built.content_type,
            "multipart/mixed; boundary=batch_00000000-0000-0000-0000-000000000abc"
        );
        assert!(!body.replace("\r\n", "").contains('\n'), "bare LF in {body:?}");
        assert!(!body.replace("\r\n", "").contains('\r'), "bare CR in {body:?}");
        assert!(body.ends_with(
            "\r\n--changeset_00000000-0000-0000-0000-000000000abc--\r\n--batch_00000000-0000-0000-0000-000000000abc--\r\n"
        ));
        assert_eq!(
            body.matches("Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n")
                .count(),
            4
        );
        for n in 1..=4 {
            assert!(body.contains(&format!("Content-ID: {n}\r\n")), "Content-ID {n}");
        }
    }

    #[test]
    fn body_has_absolute_escaped_urls_and_conditions() {
        let body = build(ENDPOINT, &table(), &ops(), id()).body;
        for line in [
            "POST http://127.0.0.1:10002/devstoreaccount1/rooms HTTP/1.1\r\n",
            "MERGE http://127.0.0.1:10002/devstoreaccount1/rooms(PartitionKey='p',RowKey='b%20c') HTTP/1.1\r\n",
            "If-Match: W/\"datetime'2026-11-30T09%3A31%3A41.0638519Z'\"\r\n",
            "PUT http://127.0.0.1:10002/devstoreaccount1/rooms(PartitionKey='p',RowKey='u') HTTP/1.1\r\n",
            "DELETE http://127.0.0.1:10002/devstoreaccount1/rooms(PartitionKey='p',RowKey='d') HTTP/1.1\r\n",
            "If-Match: *\r\n",
            r#""RowKey":"o'brien""#,
            r#""text":"line1\nline2""#,
        ] {
            assert!(body.contains(line), "missing {line:?} in {body}");
        }
        // The upsert carries no condition: exactly two If-Match headers (update, delete).
        assert_eq!(body.matches("If-Match:").count(), 2);
    }

    #[test]
    fn insert_key_with_quote_is_escaped_in_entity_urls() {
        let op = BatchOp::Delete {
            partition_key: "o'p".into(),
            row_key: "r'".into(),
            if_match: IfMatch::Any,
        };
        let body = build(ENDPOINT, &table(), &[op], id()).body;
        assert!(
            body.contains("/rooms(PartitionKey='o%27%27p',RowKey='r%27%27') HTTP/1.1"),
            "{body}"
        );
    }

    /// A success answer in the documented shape (as Azurite 3.37 sends it).
    fn success_response() -> (String, String) {
        let part = |extra: &str| {
            format!(
                "--changesetresponse_x\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
                 HTTP/1.1 204 No Content\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n\
                 DataServiceVersion: 3.0;\r\n{extra}\r\n\r\n"
            )
        };
        let body = format!(
            "--batchresponse_y\r\nContent-Type: multipart/mixed; boundary=changesetresponse_x\r\n\r\n{}{}{}{}--changesetresponse_x--\r\n--batchresponse_y--\r\n",
            part("ETag: W/\"datetime'2026-11-30T09%3A31%3A41.0638519Z'\"\r\n"),
            part("ETag: W/\"e2\"\r\n"),
            part("etag: W/\"e3\"\r\n"),
            part(""),
        );
        ("multipart/mixed; boundary=batchresponse_y".into(), body)
    }

    #[test]
    fn success_yields_etags() {
        let (content_type, body) = success_response();
        let etags = parse_response(&content_type, &body, &ops(), &table()).unwrap();
        assert_eq!(
            etags,
            vec![
                Some(ETag("W/\"datetime'2026-11-30T09%3A31%3A41.0638519Z'\"".into())),
                Some(ETag("W/\"e2\"".into())),
                Some(ETag("W/\"e3\"".into())),
                None,
            ]
        );
        // The same answer with LF line ends reads the same.
        let lf = body.replace("\r\n", "\n");
        assert_eq!(parse_response(&content_type, &lf, &ops(), &table()).unwrap().len(), 4);
    }

    fn failure_response(status: &str, code: &str, message: &str, content_id: &str) -> (String, String) {
        let body = format!(
            "--batchresponse_y\r\nContent-Type: multipart/mixed; boundary=changesetresponse_x\r\n\r\n\
             --changesetresponse_x\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
             HTTP/1.1 {status}\r\n{content_id}DataServiceVersion: 3.0;\r\n\
             Content-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n\
             {{\"odata.error\":{{\"code\":\"{code}\",\"message\":{{\"lang\":\"en-US\",\"value\":\"{message}\"}}}}}}\r\n\
             --changesetresponse_x--\r\n--batchresponse_y--\r\n"
        );
        ("multipart/mixed; boundary=batchresponse_y".into(), body)
    }

    #[test]
    fn failure_yields_index_and_kind() {
        let (content_type, body) = failure_response(
            "412 Precondition Failed",
            "UpdateConditionNotSatisfied",
            "1:The update condition specified in the request was not satisfied.\\nRequestId:r",
            "Content-ID: 2\r\n",
        );
        let err = parse_response(&content_type, &body, &ops(), &table()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::PreconditionFailed);
        assert_eq!(err.batch_index, Some(1));
        assert!(err.message.contains("UpdateConditionNotSatisfied"), "{}", err.message);

        let (content_type, body) = failure_response(
            "409 Conflict",
            "EntityAlreadyExists",
            "0:The specified entity already exists.",
            "",
        );
        let err = parse_response(&content_type, &body, &ops(), &table()).unwrap_err();
        assert_eq!((err.kind, err.batch_index), (ErrorKind::AlreadyExists, Some(0)));
    }

    #[test]
    fn failure_without_index_prefix_falls_back_to_content_id() {
        let (content_type, body) = failure_response(
            "404 Not Found",
            "ResourceNotFound",
            "The specified resource does not exist.",
            "Content-ID: 4\r\n",
        );
        let err = parse_response(&content_type, &body, &ops(), &table()).unwrap_err();
        assert_eq!((err.kind, err.batch_index), (ErrorKind::NotFound, Some(3)));
    }

    #[test]
    fn invalid_input_failure() {
        let (content_type, body) = failure_response(
            "400 Bad Request",
            "InvalidInput",
            "2:An entity can appear only once in a batch.",
            "Content-ID: 3\r\n",
        );
        let err = parse_response(&content_type, &body, &ops(), &table()).unwrap_err();
        assert_eq!((err.kind, err.batch_index), (ErrorKind::InvalidInput, Some(2)));
    }

    #[test]
    fn whole_batch_rejections_keep_a_leading_index() {
        let body = br#"{"odata.error":{"code":"InvalidInput","message":{"value":"3:Bad value: really."}}}"#;
        let err = rejected(StatusCode::BAD_REQUEST, body, 5, &table());
        assert_eq!((err.kind, err.batch_index), (ErrorKind::InvalidInput, Some(3)));
        assert_eq!(rejected(StatusCode::BAD_REQUEST, body, 3, &table()).batch_index, None);
        let err = rejected(StatusCode::REQUEST_TIMEOUT, b"", 3, &table());
        assert_eq!((err.kind, err.batch_index), (ErrorKind::Unavailable, None));
    }

    #[test]
    fn truncated_or_short_answers_are_errors() {
        let (content_type, body) = success_response();
        let truncated = &body[..body.len() - 40];
        assert_eq!(
            parse_response(&content_type, truncated, &ops(), &table())
                .unwrap_err()
                .kind,
            ErrorKind::Internal
        );
        let err = parse_response(&content_type, &body, &ops()[..3], &table()).unwrap_err();
        assert!(err.message.contains("3 operations were sent but 4 answered"), "{err}");
        assert!(parse_response("multipart/mixed", &body, &ops(), &table()).is_err());
    }
}
