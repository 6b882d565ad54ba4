//! The object store's conformance suite: what every backend of attachments does, run against
//! the embedded store (files under the data directory, its links served by the real binary)
//! and Azurite's blob service (links checked by Azurite itself). A front-end does the same
//! against either: a `PUT` with the headers it was given, a `GET` of the URL it was given.

use chrono::{Duration, Utc};
use reqwest::StatusCode;
use tabletalk::adapters::objects::{ObjectKey, Objects};

use crate::helpers::{Backend, TestApp, backend_tests, spawn_app};

backend_tests!(
    an_object_reads_back_as_written_and_deletes_once,
    a_listing_finds_the_keys_under_a_prefix_and_a_copy_is_its_own,
    an_upload_link_takes_one_put_from_a_plain_client,
    an_upload_link_works_for_its_own_object_and_method_only,
    a_download_url_answers_the_file_as_an_attachment_of_its_type,
    an_expired_download_url_is_refused_by_the_store,
    a_tampered_signature_is_refused_by_the_store,
    of_two_uploads_with_one_link_at_once_exactly_one_lands,
);

async fn of_two_uploads_with_one_link_at_once_exactly_one_lands(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id8/a.txt");
    let link = store
        .upload_link(&k, "text/plain", Utc::now() + Duration::minutes(5))
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        upload(&link.url, &link.headers, b"first"),
        upload(&link.url, &link.headers, b"second!")
    );
    let landed: Vec<bool> = [a.status(), b.status()].iter().map(|s| s.is_success()).collect();
    assert_eq!(
        landed.iter().filter(|l| **l).count(),
        1,
        "{:?} {:?}",
        a.status(),
        b.status()
    );
    let size = store.head(&k).await.unwrap().unwrap().size;
    let winner: &[u8] = if landed[0] { b"first" } else { b"second!" };
    assert_eq!(size, winner.len() as u64);
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some(winner));
}

/// The store under test; for the embedded store, the app that serves its links (kept alive
/// while the test runs) and a store handle whose links name that app.
async fn store(backend: &Backend) -> (Objects, Option<TestApp>) {
    match backend {
        Backend::Embedded { data_dir } => {
            let app = spawn_app(backend);
            let store = tabletalk::adapters::objects::embedded::EmbeddedObjects::open(data_dir, &app.base).unwrap();
            (Objects::new(store), Some(app))
        }
        Backend::Azurite { .. } => (backend.objects().await, None),
    }
}

fn key(text: &str) -> ObjectKey {
    ObjectKey::parse(text).unwrap()
}

fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn upload(url: &str, headers: &[(String, String)], body: &[u8]) -> reqwest::Response {
    let mut request = plain_client().put(url).body(body.to_vec());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

async fn an_object_reads_back_as_written_and_deletes_once(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id1/a.txt");
    store.put(&k, "text/plain", b"hello".to_vec()).await.unwrap();
    let info = store.head(&k).await.unwrap().expect("stored");
    assert_eq!((info.size, info.mime.as_str()), (5, "text/plain"));
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some(&b"hello"[..]));
    store.delete(&k).await.unwrap();
    assert_eq!(store.head(&k).await.unwrap(), None);
    assert_eq!(store.get(&k).await.unwrap(), None);
    store.delete(&k).await.expect("deleting what is gone succeeds");
}

async fn a_listing_finds_the_keys_under_a_prefix_and_a_copy_is_its_own(backend: Backend) {
    let (store, _app) = store(&backend).await;
    for k in ["a/u/1/x.txt", "a/u/2/y.txt", "b/u/1/z.txt"] {
        store.put(&key(k), "text/plain", k.as_bytes().to_vec()).await.unwrap();
    }
    let listed: Vec<String> = store.list("a/").await.unwrap().iter().map(|k| k.to_string()).collect();
    assert_eq!(listed, ["a/u/1/x.txt", "a/u/2/y.txt"]);
    assert!(store.copy(&key("a/u/1/x.txt"), &key("c/u/9/x.txt")).await.unwrap());
    assert!(
        !store
            .copy(&key("a/u/7/none.txt"), &key("c/u/8/none.txt"))
            .await
            .unwrap()
    );
    store.delete_prefix("a/").await.unwrap();
    assert!(store.list("a/").await.unwrap().is_empty());
    let copy = store.get(&key("c/u/9/x.txt")).await.unwrap();
    assert_eq!(
        copy.as_deref(),
        Some(&b"a/u/1/x.txt"[..]),
        "the copy outlives its source"
    );
    assert_eq!(
        store.head(&key("c/u/9/x.txt")).await.unwrap().unwrap().mime,
        "text/plain"
    );
}

async fn an_upload_link_takes_one_put_from_a_plain_client(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id2/photo.png");
    let link = store
        .upload_link(&k, "image/png", Utc::now() + Duration::minutes(5))
        .await
        .unwrap();
    assert_eq!(link.method, "PUT");
    let put = upload(&link.url, &link.headers, &[7u8; 1000]).await;
    assert_eq!(put.status(), StatusCode::CREATED, "{:?}", put.text().await);
    let info = store.head(&k).await.unwrap().expect("uploaded");
    assert_eq!((info.size, info.mime.as_str()), (1000, "image/png"));
    // The link creates; it cannot replace what was uploaded.
    let again = upload(&link.url, &link.headers, &[8u8; 10]).await;
    assert!(again.status().is_client_error(), "{}", again.status());
    assert_eq!(store.head(&k).await.unwrap().unwrap().size, 1000);
}

async fn an_upload_link_works_for_its_own_object_and_method_only(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id3/a.png");
    let link = store
        .upload_link(&k, "image/png", Utc::now() + Duration::minutes(5))
        .await
        .unwrap();
    let elsewhere = link.url.replace("/id3/a.png", "/id4/a.png");
    let put = upload(&elsewhere, &link.headers, b"x").await;
    assert_eq!(put.status(), StatusCode::FORBIDDEN);
    assert_eq!(store.head(&key("room/user/id4/a.png")).await.unwrap(), None);
    store.put(&k, "image/png", b"x".to_vec()).await.unwrap();
    let read = plain_client().get(&link.url).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::FORBIDDEN, "an upload link does not read");
}

async fn a_download_url_answers_the_file_as_an_attachment_of_its_type(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id5/report.pdf");
    store
        .put(&k, "application/pdf", b"%PDF-1.4 bytes".to_vec())
        .await
        .unwrap();
    let url = store
        .download_url(&k, "application/pdf", "report.pdf", Utc::now() + Duration::seconds(60))
        .await
        .unwrap();
    let got = plain_client().get(&url).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    let header = |name: &str| got.headers().get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "application/pdf");
    assert_eq!(header("content-disposition"), "attachment; filename=\"report.pdf\"");
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"%PDF-1.4 bytes");
    let write = upload(&url, &[("x-ms-blob-type".into(), "BlockBlob".into())], b"y").await;
    assert_eq!(write.status(), StatusCode::FORBIDDEN, "a download link does not write");
}

async fn an_expired_download_url_is_refused_by_the_store(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id6/a.txt");
    store.put(&k, "text/plain", b"old".to_vec()).await.unwrap();
    let url = store
        .download_url(&k, "text/plain", "a.txt", Utc::now() - Duration::seconds(5))
        .await
        .unwrap();
    let got = plain_client().get(&url).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::FORBIDDEN);
}

async fn a_tampered_signature_is_refused_by_the_store(backend: Backend) {
    let (store, _app) = store(&backend).await;
    let k = key("room/user/id7/a.txt");
    store.put(&k, "text/plain", b"secret".to_vec()).await.unwrap();
    let url = store
        .download_url(&k, "text/plain", "a.txt", Utc::now() + Duration::seconds(60))
        .await
        .unwrap();
    let (head, sig) = url.split_once("sig=").unwrap();
    let flipped = match sig.as_bytes()[0] {
        b'A' => "B",
        _ => "A",
    };
    let tampered = format!("{head}sig={flipped}{}", &sig[1..]);
    let got = plain_client().get(&tampered).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::FORBIDDEN);
    // A longer validity is a change of the signed fields too.
    let later = url.replace("se=", "se=9");
    let got = plain_client().get(&later).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::FORBIDDEN);
}

/// Fifty replays at once of an upload link already used, each with a body of the largest size
/// allowed (10 MiB): every one is refused (409, or 429 past the requests served at once, or the
/// connection closed before the body was sent), the object stays as first written, and the
/// server's peak memory grows by far less than one body each: it refuses before reading, and
/// streams what it does read. Measured from the process, not timed.
#[tokio::test]
async fn replays_of_a_used_upload_link_are_refused_without_reading_their_bodies() {
    let backend = Backend::embedded();
    let (store, app) = store(&backend).await;
    let app = app.expect("the embedded store's app");
    let k = key("room/user/id8/once.bin");
    let link = store
        .upload_link(&k, "application/octet-stream", Utc::now() + Duration::minutes(5))
        .await
        .unwrap();
    assert!(upload(&link.url, &link.headers, b"first").await.status().is_success());
    let before = app.peak_memory_kib();
    let body = bytes::Bytes::from(vec![7u8; 10 * 1024 * 1024]);
    let replays = (0..50).map(|_| {
        let mut request = plain_client().put(&link.url).body(body.clone());
        for (name, value) in &link.headers {
            request = request.header(name, value);
        }
        request.send()
    });
    for answer in futures::future::join_all(replays).await {
        if let Ok(answer) = answer {
            let status = answer.status().as_u16();
            assert!(matches!(status, 409 | 429), "a replay answered {status}");
        }
    }
    let grown = app.peak_memory_kib().saturating_sub(before);
    assert!(grown < 100 * 1024, "the server's peak memory grew by {grown} KiB");
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some(&b"first"[..]));
}
